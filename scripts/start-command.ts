/**
 * How `npm start` starts the server: the start script ends in `exec [env NAME=value ...] node [flags]
 * dist/cli/main.js serve`, the one place the server's runtime settings are written (docs/platform.md,
 * "Runtime settings"). Scripts that start the built server themselves (the benchmark, the soak) read
 * them from there and run it the same way, on the Node.js running them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Variables (the C allocator's, say) and Node.js flags to start the server with. */
export interface Launch {
  env: Record<string, string>;
  flags: string[];
}

/** Words as `env -S` takes them: NAME=value sets a variable, any other word is a flag for node. */
export function launchOf(words: string): Launch {
  const launch: Launch = { env: {}, flags: [] };
  for (const word of words.split(/\s+/).filter(Boolean)) {
    const variable = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(word);
    if (variable) launch.env[variable[1]!] = variable[2]!;
    else launch.flags.push(word);
  }
  return launch;
}

/** A start script's variables and flags; it must end in `exec [env NAME=value ...] node [flags] dist/cli/main.js serve`. */
export function launchOfStart(start: string): Launch {
  const command = /&& exec (?:env ((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+))?node\b(.*) dist\/cli\/main\.js serve$/.exec(start);
  if (!command)
    throw new Error(`the start script does not end in "exec [env NAME=value ...] node [flags] dist/cli/main.js serve": ${start}`);
  return launchOf(`${command[1] ?? ''} ${command[2]}`);
}

/**
 * How a checkout's package.json (the working directory's by default) starts the server. Builds from
 * before the start script named node ran `exec ./dist/cli/main.js serve`, with the settings on the
 * command's first line (`#!/usr/bin/env -S [NAME=value ...] node [flags]`): those are read from there,
 * so an older build compared against this one runs as its own `npm start` ran it.
 */
export function startLaunch(checkout = '.'): Launch {
  const start = (JSON.parse(readFileSync(join(checkout, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  if (!/&& exec \.\/dist\/cli\/main\.js serve$/.test(start)) return launchOfStart(start);
  const firstLine = readFileSync(join(checkout, 'dist/cli/main.js'), 'utf8').split('\n', 1)[0]!;
  const shebang = /^#!\/usr\/bin\/env (?:-S )?(.*?)\bnode\b(.*)$/.exec(firstLine);
  if (!shebang) throw new Error(`${checkout}: dist/cli/main.js does not start with #!/usr/bin/env [-S] ... node: ${firstLine}`);
  return launchOf(`${shebang[1]} ${shebang[2]}`);
}
