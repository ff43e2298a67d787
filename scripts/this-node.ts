/**
 * The built `petstore` command starts with `#!/usr/bin/env -S node <flags>`: that line is the one place
 * the server's Node.js flags are written. Scripts that start it as a program put the Node.js running
 * them first on PATH, so the command runs on the same Node.js and not whichever `node` PATH finds first.
 */
import { dirname, delimiter } from 'node:path';

export function withThisNode<E extends Record<string, string | undefined>>(env: E): E & { PATH: string } {
  return { ...env, PATH: [dirname(process.execPath), env.PATH ?? process.env.PATH ?? ''].join(delimiter) };
}
