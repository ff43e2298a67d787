/**
 * Redis servers of a test's own, as managed services run them: redis-server processes on free ports,
 * with TLS (certificates made here by openssl: an authority and a server certificate for 127.0.0.1),
 * ACL users, or six nodes joined into a cluster of three masters with one replica each. Nothing is kept
 * on disk but the cluster's node files, in the test's temporary directory. The caller stops them
 * (kill, stop) when its test ends; one still running when the test process ends is killed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './processes.ts';
import { killAtExit } from './temp.ts';
import { eventually } from './waiting.ts';

export interface RedisProcess {
  port: number;
  child: ChildProcess;
  output(): string;
  /** SIGKILL: a node lost, as a crashed machine loses it. */
  kill(): Promise<void>;
}

/**
 * Starts redis-server with the given configuration lines; resolves once it accepts connections. A
 * `port` given starts it again where an earlier one ran (a restart).
 */
export async function startRedis(dir: string, name: string, lines: string[], tls = false, port?: number): Promise<RedisProcess> {
  port ??= await freePort();
  const file = join(dir, `${name}.conf`);
  writeFileSync(
    file,
    [
      'bind 127.0.0.1',
      tls ? 'port 0' : `port ${port}`,
      ...(tls ? [`tls-port ${port}`] : []),
      'save ""',
      'appendonly no',
      `dir ${dir}`,
      ...lines,
      '',
    ].join('\n'),
  );
  const child = spawn('redis-server', [file], { stdio: ['ignore', 'pipe', 'pipe'] });
  killAtExit(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  try {
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`redis-server ${name} exited:\n${output}`);
      return /Ready to accept connections/.test(output);
    }, 10_000);
  } catch (err) {
    await kill();
    throw err;
  }
  return { port, child, output: () => output, kill };
}

export interface Certificates {
  caFile: string;
  certFile: string;
  keyFile: string;
  ca: Buffer;
}

/** An authority and a server certificate it signed for 127.0.0.1 and localhost, in `dir`. */
export function makeCertificates(dir: string): Certificates {
  const at = (f: string) => join(dir, f);
  const openssl = (...args: string[]) => {
    const r = spawnSync('openssl', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=petstore test authority',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', at('server.key'), '-out', at('server.csr'));
  writeFileSync(at('server.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\n');
  openssl(
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    at('server.ext'),
    '-out',
    at('server.pem'),
  );
  return { caFile: at('ca.pem'), certFile: at('server.pem'), keyFile: at('server.key'), ca: readFileSync(at('ca.pem')) };
}

/** The configuration lines of a TLS listener with these certificates; clients need no certificate. */
export function tlsLines(certs: Certificates): string[] {
  return [`tls-cert-file ${certs.certFile}`, `tls-key-file ${certs.keyFile}`, `tls-ca-cert-file ${certs.caFile}`, 'tls-auth-clients no'];
}

export interface RedisCluster {
  nodes: RedisProcess[];
  /** CLUSTER NODES as the first live node reports it, for a failure's message. */
  describe(): Promise<string>;
  /** Seed URLs, as REDIS_CLUSTER_NODES takes them. */
  seeds: string[];
  /** The node serving a slot as master now, from CLUSTER SHARDS as any live node reports it. */
  masterOf(slot: number): Promise<RedisProcess>;
  stop(): Promise<void>;
}

/** Whether a node is part of a healthy cluster: its state ok and, for a replica, its copy in sync with its master. */
async function settled(port: number): Promise<boolean> {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    const cluster = String(await redis.call('CLUSTER', 'INFO'));
    const replication = await redis.info('replication');
    return /cluster_state:ok/.test(cluster) && (/role:master/.test(replication) || /master_link_status:up/.test(replication));
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * Six nodes, three masters each with a replica, created by redis-cli, returned once every replica is in
 * sync. A node is taken for failed after cluster-node-timeout (1 s here), and its replica is then promoted.
 */
export async function startCluster(dir: string): Promise<RedisCluster> {
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      nodes.push(
        await startRedis(dir, `node-${i}`, [
          'cluster-enabled yes',
          `cluster-config-file nodes-${i}.conf`,
          'cluster-node-timeout 1000',
          // A replica takes over however long ago it last heard from its master: on a loaded machine
          // its data may look older than the default allows (10 × the node timeout).
          'cluster-replica-validity-factor 0',
        ]),
      );
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8' },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${create.stdout}${create.stderr}`);
    // Every replica in sync before a test starts: a replica that never synced would refuse to take over.
    await eventually(async () => (await Promise.all(nodes.map((n) => settled(n.port)))).every(Boolean), 30_000);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.kill()));
    throw err;
  }

  const masterOf = async (slot: number): Promise<RedisProcess> => {
    for (const node of nodes) {
      if (node.child.exitCode !== null || node.child.signalCode !== null) continue;
      const redis = new Redis(node.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
      try {
        const slots = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
        const range = slots.find(([from, to]) => from <= slot && slot <= to);
        if (range) return nodes.find((n) => n.port === Number(range[2][1]))!;
      } catch {
        // a node going down: ask another
      } finally {
        redis.disconnect();
      }
    }
    throw new Error(`no live node knows slot ${slot}`);
  };

  const describe = async (): Promise<string> => {
    const live = nodes.find((n) => n.child.exitCode === null && n.child.signalCode === null);
    if (!live) return 'no live node';
    const redis = new Redis(live.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      return String(await redis.call('CLUSTER', 'NODES'));
    } finally {
      redis.disconnect();
    }
  };

  return {
    nodes,
    describe,
    seeds: nodes.slice(0, 2).map((n) => `redis://127.0.0.1:${n.port}`),
    masterOf,
    stop: async () => {
      await Promise.all(nodes.map((n) => n.kill()));
    },
  };
}
