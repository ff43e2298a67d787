/**
 * node:http as Node's own module object, not through an ESM import. An ESM import builds a namespace
 * of every export, and reading node:http's lazy `WebSocket`, `CloseEvent` and `MessageEvent` exports
 * loads Node's bundled fetch and WebSocket client, which the server never uses: about 4 MB of heap,
 * and 4 to 5 MB off the peak resident memory of a server under load (BENCHMARKS.md). Types still
 * come from `import type ... from 'node:http'`, which leaves nothing at run time.
 */
export const nodeHttp = process.getBuiltinModule('node:http');
