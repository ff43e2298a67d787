/**
 * node:http as Node's own module object: an ESM import's namespace reads the lazy WebSocket exports, which load
 * Node's bundled fetch and WebSocket client, memory the server never uses (docs/platform.md). Types still come
 * from `import type`, which leaves nothing at run time.
 */
export const nodeHttp = process.getBuiltinModule('node:http');
