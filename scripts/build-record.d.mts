/** Types of build-record.mjs, which stays plain JavaScript so that it runs before anything is compiled. */

/** The project's root folder. */
export const ROOT: string;
/** Each input's size and modification time, by path from the root; null for one that is missing. */
export type Snapshot = Record<string, [size: number, mtimeMs: number] | null>;
/** The build's inputs, as paths from the root (those in node_modules as installed). */
export function buildInputs(): string[];
export function snapshot(): Snapshot;
/** Why the last build no longer matches, in a few words; undefined when it does. */
export function staleness(now: Snapshot): string | undefined;
export function record(before: Snapshot): void;
