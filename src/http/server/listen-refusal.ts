/** A listen that failed, said in terms of PORT and HOST: the port taken, a privileged port, an address not on this machine. */
export function listenRefusal(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  const where = `${host}:${port}`;
  if (code === 'EADDRINUSE') return new Error(`cannot listen on ${where}: another process uses it (set PORT or --port)`, { cause: err });
  if (code === 'EACCES') return new Error(`cannot listen on ${where}: not allowed (ports below 1024 need privileges)`, { cause: err });
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new Error(`cannot listen on ${where}: no such address on this machine (set HOST or --host)`, { cause: err });
  }
  return err;
}
