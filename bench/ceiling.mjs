// The ceiling: a bare node:http server answering the same 20-pet JSON body from memory.
// Usage: node bench/ceiling.mjs PORT BODY_FILE
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const [port, bodyFile] = process.argv.slice(2);
const body = readFileSync(bodyFile);
createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  res.end(body);
}).listen(Number(port), '127.0.0.1', () => console.log('ready'));
