// The framework floor: one bare Fastify route (the project's own fastify, logger off) answering the
// same 20-pet body as the ceiling, already serialised. What the service spends above this row is its
// own work; what this row spends above the ceiling is the framework's.
// Usage: node bench/fastify-floor.mjs PORT BODY_FILE
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const [port, bodyFile] = process.argv.slice(2);
const body = readFileSync(bodyFile, 'utf8');
const app = Fastify({ logger: false });
app.get('/', (_request, reply) => {
  reply.type('application/json; charset=utf-8').send(body);
});
await app.listen({ port: Number(port), host: '127.0.0.1' });
console.log('ready');
