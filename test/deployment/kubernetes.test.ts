/**
 * deploy/kubernetes/ without a cluster: every manifest is valid against the Kubernetes API's schemas
 * (kubernetes-models) and has no field the API does not know (its types, through the TypeScript
 * compiler: a misspelt field passes the schemas, which allow unknown ones); and the manifests agree
 * with the server and with each other. The container port is the server's PORT; the probes' paths
 * answer 200 on a real server; the grace period outlasts preStop and the server's shutdown bound; every
 * variable is one the server reads, with a value it accepts; every Secret reference resolves; the
 * Service and the PodDisruptionBudget select the Deployment's pods (and not the migration Job's); the
 * Job runs the image's petstore command; and the server, run as the image runs it and traced by strace,
 * writes no file but its database, so a read-only root file system holds it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import ts from 'typescript';
import { parseAllDocuments, parse } from 'yaml';
import { COMMANDS } from '../../src/cli/commands.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { exitWithin, explain, freePort, runCli } from '../support/processes.ts';
import { startTestServer } from '../support/servers.ts';
import { tempDir } from '../support/temp.ts';
import { startTracedServer, stracePresent } from '../support/traced-server.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FOLDER = join(ROOT, 'deploy/kubernetes');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** The kinds shipped, each with its model (the API's schema) and its type (the API's fields). */
const KINDS: Record<string, { model: new (data: any) => { validate(): void }; module: string; type: string }> = {
  'apps/v1 Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' },
  'batch/v1 Job': { model: Job, module: 'kubernetes-models/batch/v1/Job', type: 'IJob' },
  'policy/v1 PodDisruptionBudget': {
    model: PodDisruptionBudget,
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    type: 'IPodDisruptionBudget',
  },
  'v1 Secret': { model: Secret, module: 'kubernetes-models/v1/Secret', type: 'ISecret' },
  'v1 Service': { model: Service, module: 'kubernetes-models/v1/Service', type: 'IService' },
};

interface Manifest {
  file: string;
  kindKey: string;
  doc: any;
}

const manifests: Manifest[] = readdirSync(FOLDER)
  .filter((name) => name.endsWith('.yaml'))
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(FOLDER, file), 'utf8')).map((document) => {
      assert.deepEqual(document.errors, [], file);
      const doc = document.toJS() as any;
      return { file, kindKey: `${doc.apiVersion} ${doc.kind}`, doc };
    }),
  );

/** The one manifest of a kind. */
function only(kindKey: string): any {
  const found = manifests.filter((m) => m.kindKey === kindKey);
  assert.equal(found.length, 1, `one ${kindKey} in deploy/kubernetes/`);
  return found[0]!.doc;
}

const deployment = only('apps/v1 Deployment');
const job = only('batch/v1 Job');
const secret = only('v1 Secret');
const service = only('v1 Service');
const pdb = only('policy/v1 PodDisruptionBudget');
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const jobPod = job.spec.template.spec;
const jobContainer = jobPod.containers[0];

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

/** A container's environment, Secret references resolved from the shipped Secret (its placeholders). */
function environment(env: EnvVar[]): Record<string, string> {
  const values = { ...secret.stringData, ...Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, atob(v as string)])) };
  return Object.fromEntries(
    env.map(({ name, value, valueFrom }) => {
      if (valueFrom === undefined) return [name, value ?? ''];
      const ref = valueFrom.secretKeyRef;
      assert.ok(ref, `${name} comes from a Secret`);
      assert.equal(ref.name, secret.metadata.name, `${name}: the Secret is the shipped one`);
      assert.ok(ref.key in values, `${name}: the Secret has the key ${ref.key}`);
      return [name, values[ref.key] as string];
    }),
  );
}

const known = (name: string) => CONFIG_VARIABLES.includes(name);
/** What the server reads of a container's environment, with the defaults of what it leaves unset. */
const configOf = (env: Record<string, string>) => loadConfig(Object.fromEntries(Object.entries(env).filter(([name]) => known(name))));
const deploymentEnv = environment(container.env);
const config = configOf(deploymentEnv);

test('every manifest is valid against the Kubernetes schemas', () => {
  assert.ok(manifests.length >= 5, manifests.map((m) => m.file).join(' '));
  for (const { file, kindKey, doc } of manifests) {
    const kind = KINDS[kindKey];
    assert.ok(kind, `${file}: ${kindKey} is a kind this test knows`);
    assert.doesNotThrow(() => new kind.model(doc).validate(), `${file}: ${kindKey}`);
  }
  // The schemas do see a wrong value.
  const broken = structuredClone(deployment);
  broken.spec.template.spec.terminationGracePeriodSeconds = 'twenty';
  assert.throws(() => new Deployment(broken).validate(), /terminationGracePeriodSeconds/);
});

/** The TypeScript compiler's complaints about each manifest as an object of its kind's type. */
function typeErrors(docs: readonly Manifest[]): string[] {
  const fileName = join(ROOT, 'test/deployment/manifests.check.ts');
  const source = docs
    .map(({ kindKey, doc }, i) => {
      const { module, type } = KINDS[kindKey]!;
      return `import type { ${type} as T${i} } from '${module}';\nexport const m${i}: T${i} = ${JSON.stringify(doc)};\n`;
    })
    .join('');
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, language, ...rest) =>
    name === fileName ? ts.createSourceFile(name, source, language) : getSourceFile.call(host, name, language, ...rest);
  host.fileExists = (name) => name === fileName || fileExists.call(host, name);
  host.readFile = (name) => (name === fileName ? source : readFile.call(host, name));
  const program = ts.createProgram([fileName], options, host);
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(fileName))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

test('no manifest has a field the Kubernetes API does not know', () => {
  assert.deepEqual(typeErrors(manifests), []);
  // The check sees a misspelt field, which the schemas let through.
  const misspelt = structuredClone(deployment);
  misspelt.spec.template.spec.containers[0].readinesProbe = misspelt.spec.template.spec.containers[0].readinessProbe;
  assert.doesNotThrow(() => new Deployment(misspelt).validate());
  const errors = typeErrors([{ file: 'deployment.yaml', kindKey: 'apps/v1 Deployment', doc: misspelt }]);
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors[0]!, /readinesProbe\W* does not exist in type 'IContainer'/);
});

test('every variable the Deployment and the Job set is one the server reads, with a value it accepts', () => {
  for (const [what, env] of [
    ['Deployment', deploymentEnv],
    ['Job', environment(jobContainer.env)],
  ] as const) {
    for (const name of Object.keys(env)) assert.ok(known(name), `the ${what} sets ${name}, which the server does not read`);
    assert.doesNotThrow(() => configOf(env), what);
  }
  assert.equal(config.database.engine, 'postgres');
  assert.ok(config.redisUrl?.startsWith('redis'), 'the limiter is in Redis');
  assert.equal(config.host, '0.0.0.0', "the probes and the Service reach the pod's address");
  assert.equal(deploymentEnv.MIGRATIONS, 'refuse', 'instances never migrate: the Job does, before the rollout');
});

test('the Secret holds only placeholders, and every key the manifests reference', () => {
  const keys = Object.keys({ ...secret.stringData, ...secret.data });
  const referenced = [...container.env, ...jobContainer.env].flatMap((e: EnvVar) =>
    e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef.key] : [],
  );
  assert.deepEqual([...new Set(referenced)].sort(), [...keys].sort(), 'every key is used, and every reference has its key');
  for (const key of keys) assert.match(String(secret.stringData?.[key]), /REPLACE-ME/, `${key} is a placeholder`);
  assert.match(read('deploy/kubernetes/secret.yaml'), /^# PLACEHOLDERS/);
});

test("the container port is the server's PORT, and the image's; the metrics port is METRICS_PORT", () => {
  const ports = Object.fromEntries((container.ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]));
  assert.equal(ports.http, config.port);
  assert.equal(ports.metrics, config.metricsPort);
  const dockerfile = read('Dockerfile');
  assert.equal(Number(/^EXPOSE (\d+)$/m.exec(dockerfile)![1]), ports.http, "the Dockerfile's EXPOSE");
  // The pod runs the image's command (node with npm start's flags, serve): nothing here replaces it.
  assert.equal(container.command, undefined);
  assert.equal(container.args, undefined);
});

test('the probes ask paths a real server answers with 200, on the named port', async (t) => {
  const probes = ['startupProbe', 'livenessProbe', 'readinessProbe'].map((name) => [name, container[name]?.httpGet] as const);
  const server = await startTestServer({}, { owner: t });
  for (const [name, httpGet] of probes) {
    assert.ok(httpGet, `${name} asks over HTTP`);
    assert.equal(httpGet.port, 'http', `${name} asks the port named http`);
    assert.equal((await fetch(server.url + httpGet.path)).status, 200, `${name}: GET ${httpGet.path}`);
  }
  // Liveness never touches storage (an outage must not restart pods); readiness does, and fails while draining.
  assert.equal(container.livenessProbe.httpGet.path, '/healthz');
  assert.equal(container.readinessProbe.httpGet.path, '/readyz');
  // A start waits for a migration lock before it listens (docs/operations.md, "Migrations").
  const { periodSeconds, failureThreshold } = container.startupProbe;
  assert.ok(
    periodSeconds * failureThreshold * 1000 > config.migrationLockWaitMs,
    `the startup probe (${periodSeconds} s × ${failureThreshold}) outlasts MIGRATION_LOCK_WAIT_MS (${config.migrationLockWaitMs} ms)`,
  );
});

test('the grace period outlasts preStop and the shutdown the server bounds', () => {
  const preStopMs = container.lifecycle.preStop.sleep.seconds * 1000;
  const graceMs = pod.terminationGracePeriodSeconds * 1000;
  // The grace counts from preStop's start; SHUTDOWN_TIMEOUT_MS from the SIGTERM after it, drain included
  // (src/shutdown.ts). Past the grace the kubelet kills the process.
  assert.ok(config.shutdownDrainMs < config.shutdownTimeoutMs);
  assert.ok(
    graceMs > preStopMs + config.shutdownTimeoutMs,
    `terminationGracePeriodSeconds (${graceMs} ms) > preStop (${preStopMs} ms) + SHUTDOWN_TIMEOUT_MS (${config.shutdownTimeoutMs} ms)`,
  );
  assert.ok(preStopMs > 0, 'a preStop wait, for the endpoints to drop the pod');
});

test("the Service and the PodDisruptionBudget select the Deployment's pods, and not the migration Job's", () => {
  const podLabels = deployment.spec.template.metadata.labels as Record<string, string>;
  const jobLabels = job.spec.template.metadata.labels as Record<string, string>;
  const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
  assert.ok(selects(deployment.spec.selector.matchLabels, podLabels), "the Deployment's selector matches its pods");
  for (const [what, selector] of [
    ['Service', service.spec.selector],
    ['PodDisruptionBudget', pdb.spec.selector.matchLabels],
  ] as const) {
    assert.ok(selects(selector, podLabels), `the ${what} selects the Deployment's pods`);
    assert.ok(!selects(selector, jobLabels), `the ${what} does not select the migration Job's pod`);
  }
  const named = (container.ports as { name: string }[]).map((p) => p.name);
  for (const port of service.spec.ports)
    assert.ok(named.includes(port.targetPort), `the Service targets the container's port named ${port.targetPort}`);
});

test("the Deployment's settings are compose's, where both set one", () => {
  const compose = parse(read('compose.yaml')) as { services: Record<string, { environment?: Record<string, string> }> };
  const composeEnv = compose.services['api-1']!.environment!;
  const literal = (container.env as EnvVar[]).filter((e) => e.valueFrom === undefined && e.name in composeEnv);
  assert.ok(literal.length >= 5, literal.map((e) => e.name).join(' '));
  for (const { name, value } of literal) assert.equal(value, composeEnv[name], name);
});

test('both pods run as a user of the image, not root, on a read-only root file system, without privileges', () => {
  for (const [what, spec, c] of [
    ['Deployment', pod, container],
    ['Job', jobPod, jobContainer],
  ]) {
    assert.equal(spec.securityContext.runAsNonRoot, true, what);
    // The image's user (USER node) by number: runAsNonRoot cannot check a name.
    assert.ok(spec.securityContext.runAsUser > 0, what);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true, what);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false, what);
    assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], what);
    assert.equal(spec.automountServiceAccountToken, false, what);
    assert.ok(c.resources.requests.memory && c.resources.limits.memory, what);
  }
  assert.match(read('Dockerfile'), /^USER node$/m);
  assert.equal(jobContainer.image, container.image, 'the Job migrates for the image the Deployment runs');
  const version = (JSON.parse(read('package.json')) as { version: string }).version;
  assert.ok(container.image.endsWith(`:${version}`), `the image is tagged with the package's version ${version}`);
});

test("the migration Job runs the image's petstore command: migrate", () => {
  const dockerfile = read('Dockerfile');
  const runtimeStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const workdir = /^WORKDIR (\S+)$/m.exec(runtimeStage)![1]!;
  const bin = (JSON.parse(read('package.json')) as { bin: { petstore: string } }).bin.petstore;
  assert.deepEqual(jobContainer.command, [posix.join(workdir, bin)], 'the command the image holds at WORKDIR');
  // Run as a program of its own, through its first line, as `docker exec ... ./dist/cli/main.js` does.
  assert.equal(read('src/cli/main.ts').split('\n')[0], '#!/usr/bin/env node');
  assert.equal(jobPod.restartPolicy, 'Never');
  assert.deepEqual(jobContainer.args, ['migrate']);
  assert.ok(
    COMMANDS.some((c) => c.name === 'migrate'),
    'a command of the CLI',
  );
});

test('the server run as the image runs it writes no file but its database: a read-only root file system holds it', async (t) => {
  if (!stracePresent(t)) return;
  const dockerfile = read('Dockerfile');
  const [node, ...args] = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
  assert.equal(node, 'node');
  // SQLite in a folder of the test stands in for PostgreSQL, which writes nothing here, and Redis is
  // left out; everything else is the Deployment's, but for this test's ports.
  const data = tempDir(t);
  const [port, metricsPort] = [await freePort(), await freePort()];
  const env = Object.fromEntries(Object.entries(deploymentEnv).filter(([name]) => known(name) && name !== 'REDIS_URL'));
  Object.assign(env, {
    DATABASE_URL: `sqlite:${data}/petstore.db`,
    HOST: '127.0.0.1',
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
  });
  // The rollout's order: the Job migrates, then the instances (MIGRATIONS=refuse) start on a current schema.
  const migrated = await runCli(['migrate'], { DATABASE_URL: env.DATABASE_URL });
  assert.equal(migrated.code, 0, explain(['migrate'], migrated));
  const url = `http://127.0.0.1:${port}`;
  const { server, trace } = await startTracedServer(t, process.execPath, args, env, url, { cwd: ROOT, startWithinMs: 30_000 });
  for (const path of ['/healthz', '/readyz', '/docs', '/v1/openapi.json', '/v1/pets']) await (await fetch(url + path)).arrayBuffer();
  await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).arrayBuffer();
  server.child.kill('SIGTERM');
  assert.equal(await exitWithin(server, config.shutdownTimeoutMs + 5000), 0, server.output());
  const { written } = await trace();
  assert.ok(
    written.some((path) => path.startsWith(data + '/')),
    'the database was written',
  );
  assert.deepEqual(
    written.filter((path) => !path.startsWith(data + '/') && path !== data),
    [],
    'files written outside the database folder',
  );
  assert.ok(existsSync(join(data, 'petstore.db')));
});
