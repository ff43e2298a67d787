/**
 * How `npm start` starts the server: the start script ends in `exec [env NAME=value ...] node [flags]
 * dist/cli/main.js serve`, the one place the server's runtime settings are written (docs/platform.md,
 * "Runtime settings"). Scripts that start the built server themselves (the benchmark, the soak) read
 * them from there and run it the same way, on the Node.js running them.
 */
import { readFileSync } from 'node:fs';

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

/** How package.json (in the working directory) starts the server. */
export function startLaunch(): Launch {
  return launchOfStart((JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start);
}
