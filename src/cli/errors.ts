/**
 * The two kinds of refusal the command prints in one line, told apart by their exit status (see
 * docs/cli.md): what was typed cannot mean anything (2), or it can but the keys say no (1).
 */

/** The command line itself is wrong: an unknown command or flag, a missing or senseless value. Exit 2. */
export class UsageError extends Error {}

/** The command is well formed but the state forbids it: an unknown key ID, a key already revoked. Exit 1. */
export class StateError extends Error {}
