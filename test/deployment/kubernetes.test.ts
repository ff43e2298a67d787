/**
 * deploy/kubernetes/ without a cluster. `kubectl kustomize` renders the base, offline and as a fresh
 * checkout has it; every object rendered is valid against the Kubernetes API's schemas
 * (kubernetes-models) and has no field the API does not know (its types, through the TypeScript
 * compiler: a misspelt field passes the schemas, which allow unknown ones), and the PodMonitor, a kind
 * kubernetes-models lacks, has what its CRD requires and no field it does not know. The objects agree
 * with the server and with each other: the image is named once; no Secret is rendered, and the
 * operator's secret.env is one git ignores; each release's migration Job has a name of its own and the
 * Helm and Argo CD hooks; every selector takes the Deployment's pods and never the Job's; TRUST_PROXY,
 * the Ingress and the NetworkPolicy agree on the one proxy in front; the container ports, the probes'
 * paths (on a real server), the grace period and every variable are the server's; the Job runs the
 * image's petstore command; and the server, run as the image runs it and traced by strace, writes no
 * file but its database, so a read-only root file system holds it.
 *
 * docs/operations.md's scripts (the Secret, then each release) run with the real kubectl against a
 * stand-in API server of this file's, which stores what kubectl sends and answers as the API does, Job
 * status included, but runs no controller. What only a cluster shows (the scheduler honouring the
 * spread, a network plugin enforcing the policy, Helm and Argo CD running the hooks, the Prometheus
 * Operator scraping) is checked in the fields that ask for it, no further. Without kubectl the file is
 * skipped loudly, and fails under CI=true.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join, posix } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import ts from 'typescript';
import { parseAllDocuments, parse, stringify } from 'yaml';
import { COMMANDS } from '../../src/cli/commands.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { exitWithin, explain, freePort, runCli } from '../support/processes.ts';
import { startTestServer } from '../support/servers.ts';
import { atEnd, killGroup, killGroupAtExit, tempDir } from '../support/temp.ts';
import { toolMissing } from '../support/tools.ts';
import { startTracedServer, stracePresent } from '../support/traced-server.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FOLDER = join(ROOT, 'deploy/kubernetes');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

const KUBECTL = spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).stdout.trim();
const noKubectl = toolMissing(
  'deploy/kubernetes as kubectl kustomize renders it',
  KUBECTL ? undefined : 'kubectl is not installed: install kubectl 1.27 or newer (its kustomize renders the base)',
);

/** The kinds rendered, each with its model (the API's schema) and its type (the API's fields). */
const KINDS: Record<string, { model: new (data: any) => { validate(): void }; module: string; type: string }> = {
  'apps/v1 Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' },
  'batch/v1 Job': { model: Job, module: 'kubernetes-models/batch/v1/Job', type: 'IJob' },
  'networking.k8s.io/v1 Ingress': { model: Ingress, module: 'kubernetes-models/networking.k8s.io/v1/Ingress', type: 'IIngress' },
  'networking.k8s.io/v1 NetworkPolicy': {
    model: NetworkPolicy,
    module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
    type: 'INetworkPolicy',
  },
  'policy/v1 PodDisruptionBudget': {
    model: PodDisruptionBudget,
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    type: 'IPodDisruptionBudget',
  },
  'v1 Service': { model: Service, module: 'kubernetes-models/v1/Service', type: 'IService' },
};
const POD_MONITOR = 'monitoring.coreos.com/v1 PodMonitor';

const kindKey = (doc: any) => `${doc.apiVersion} ${doc.kind}`;

/** `kubectl ARGS`, which must succeed: what it prints. */
function kubectl(args: string[]): string {
  const run = spawnSync(KUBECTL, args, { cwd: ROOT, encoding: 'utf8' });
  assert.equal(run.status, 0, `kubectl ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/** The objects `kubectl kustomize` renders from a kustomization's folder. */
function render(dir: string): any[] {
  return parseAllDocuments(kubectl(['kustomize', dir])).map((document) => {
    assert.deepEqual(document.errors, [], dir);
    return document.toJS() as any;
  });
}

/** The one object of a kind among some. */
function one(docs: readonly any[], key: string): any {
  const found = docs.filter((d) => kindKey(d) === key);
  assert.equal(found.length, 1, `one ${key} rendered`);
  return found[0];
}

/** A copy of deploy/kubernetes/ as a fresh checkout has it (no secret.env) in a temporary checkout root. */
function checkoutCopy(t: TestContext): { root: string; base: string } {
  const root = tempDir(t);
  const base = join(root, 'deploy/kubernetes');
  cpSync(FOLDER, base, { recursive: true, filter: (path) => basename(path) !== 'secret.env' });
  return { root, base };
}

/** Every manifest file of the folder (kustomizations aside), its components' included. */
function manifestFiles(dir = FOLDER): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return manifestFiles(path);
    return name.endsWith('.yaml') && name !== 'kustomization.yaml' ? [path] : [];
  });
}

/** A selector's labels all on a pod (an empty selector counts as none: it would take every pod). */
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

/** KEY=VALUE lines, as `kubectl create secret --from-env-file` reads them (# comments and blank lines skipped). */
function envFile(text: string): Record<string, string> {
  const lines = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
  return Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
}

/** The PodMonitor CRD's (monitoring.coreos.com/v1) fields, by name: kubernetes-models has no schema for it. */
const POD_MONITOR_FIELDS = {
  spec: [
    'attachMetadata',
    'bodySizeLimit',
    'convertClassicHistogramsToNHCB',
    'fallbackScrapeProtocol',
    'jobLabel',
    'keepDroppedTargets',
    'labelLimit',
    'labelNameLengthLimit',
    'labelValueLengthLimit',
    'namespaceSelector',
    'nativeHistogramBucketLimit',
    'nativeHistogramMinBucketFactor',
    'podMetricsEndpoints',
    'podTargetLabels',
    'sampleLimit',
    'scrapeClass',
    'scrapeClassicHistograms',
    'scrapeNativeHistograms',
    'scrapeProtocols',
    'selector',
    'selectorMechanism',
    'targetLimit',
  ],
  endpoint: [
    'authorization',
    'basicAuth',
    'bearerTokenSecret',
    'enableHttp2',
    'filterRunning',
    'followRedirects',
    'honorLabels',
    'honorTimestamps',
    'interval',
    'metricRelabelings',
    'noProxy',
    'oauth2',
    'params',
    'path',
    'port',
    'portNumber',
    'proxyConnectHeader',
    'proxyFromEnvironment',
    'proxyUrl',
    'relabelings',
    'scheme',
    'scrapeTimeout',
    'targetPort',
    'tlsConfig',
    'trackTimestampsStaleness',
  ],
};

/** What the CRD would refuse or drop in a PodMonitor, and what would scrape nothing. */
function podMonitorProblems(doc: any): string[] {
  const problems: string[] = [];
  const unknown = (where: string, object: object, known: readonly string[]) => {
    for (const field of Object.keys(object)) if (!known.includes(field)) problems.push(`${where}.${field} is not a field`);
  };
  if (kindKey(doc) !== POD_MONITOR) problems.push(`${kindKey(doc)} is not a ${POD_MONITOR}`);
  unknown('', doc, ['apiVersion', 'kind', 'metadata', 'spec']);
  if (typeof doc.metadata?.name !== 'string') problems.push('metadata.name is required');
  const spec = doc.spec;
  if (typeof spec !== 'object' || spec === null) return [...problems, 'spec is required'];
  unknown('spec', spec, POD_MONITOR_FIELDS.spec);
  // The CRD requires the selector; without labels it would take every pod of the namespace.
  if (typeof spec.selector !== 'object' || Object.keys(spec.selector.matchLabels ?? {}).length === 0)
    problems.push('spec.selector.matchLabels is required');
  else unknown('spec.selector', spec.selector, ['matchLabels', 'matchExpressions']);
  if (spec.jobLabel !== undefined && typeof spec.jobLabel !== 'string') problems.push('spec.jobLabel is a string');
  if (!Array.isArray(spec.podMetricsEndpoints) || spec.podMetricsEndpoints.length === 0)
    return [...problems, 'spec.podMetricsEndpoints is empty: nothing would be scraped'];
  spec.podMetricsEndpoints.forEach((endpoint: any, i: number) => {
    unknown(`spec.podMetricsEndpoints[${i}]`, endpoint, POD_MONITOR_FIELDS.endpoint);
    if (typeof endpoint.port !== 'string') problems.push(`spec.podMetricsEndpoints[${i}].port names no port`);
    if (typeof endpoint.path !== 'string' || !endpoint.path.startsWith('/'))
      problems.push(`spec.podMetricsEndpoints[${i}].path is no path`);
  });
  return problems;
}

/** The TypeScript compiler's complaints about each object as an object of its kind's type. */
function typeErrors(docs: readonly any[]): string[] {
  const fileName = join(ROOT, 'test/deployment/manifests.check.ts');
  const source = docs
    .map((doc, i) => {
      const { module, type } = KINDS[kindKey(doc)]!;
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

/** The `sh` blocks of docs/operations.md's "On Kubernetes", the one holding `marker`. */
function docsScript(marker: string): string {
  const docs = read('docs/operations.md');
  const start = docs.indexOf('\n## On Kubernetes\n');
  const section = docs.slice(start, docs.indexOf('\n## ', start + 1));
  const blocks = [...section.matchAll(/\n```sh\n([\s\S]*?)\n```\n/g)].map((m) => m[1]!).filter((block) => block.includes(marker));
  assert.equal(blocks.length, 1, `one sh block of "On Kubernetes" holds ${marker}`);
  return blocks[0]!;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

const known = (name: string) => CONFIG_VARIABLES.includes(name);
/** What the server reads of a container's environment, with the defaults of what it leaves unset. */
const configOf = (env: Record<string, string>) => loadConfig(Object.fromEntries(Object.entries(env).filter(([name]) => known(name))));

/** The name of the Secret the docs have the operator create, and the keys its example file gives it. */
const SECRET_NAME = 'petstore';
const secretExample = envFile(read('deploy/kubernetes/secret.env.example'));

/** A container's environment, Secret references resolved from secret.env.example (its example values). */
function environment(env: EnvVar[]): Record<string, string> {
  return Object.fromEntries(
    env.map(({ name, value, valueFrom }) => {
      if (valueFrom === undefined) return [name, value ?? ''];
      const ref = valueFrom.secretKeyRef;
      assert.ok(ref, `${name} comes from a Secret`);
      assert.equal(ref.name, SECRET_NAME, `${name}: the Secret is the one the docs create`);
      assert.ok(ref.key in secretExample, `${name}: secret.env.example has the key ${ref.key}`);
      return [name, secretExample[ref.key]!];
    }),
  );
}

describe('deploy/kubernetes as kubectl kustomize renders it', { skip: noKubectl }, () => {
  const objects = render(FOLDER);
  const deployment = one(objects, 'apps/v1 Deployment');
  const job = one(objects, 'batch/v1 Job');
  const service = one(objects, 'v1 Service');
  const pdb = one(objects, 'policy/v1 PodDisruptionBudget');
  const ingress = one(objects, 'networking.k8s.io/v1 Ingress');
  const policy = one(objects, 'networking.k8s.io/v1 NetworkPolicy');
  const pod = deployment.spec.template.spec;
  const podLabels = deployment.spec.template.metadata.labels as Record<string, string>;
  const container = pod.containers[0];
  const jobPod = job.spec.template.spec;
  const jobLabels = job.spec.template.metadata.labels as Record<string, string>;
  const jobContainer = jobPod.containers[0];
  const deploymentEnv = environment(container.env);
  const config = configOf(deploymentEnv);
  const kustomization = parse(read('deploy/kubernetes/kustomization.yaml')) as {
    images: { name: string; newName: string; newTag: string }[];
    replacements: unknown[];
  };
  const [image] = kustomization.images;
  const version = (JSON.parse(read('package.json')) as { version: string }).version;
  const containerPorts = container.ports as { name: string; containerPort: number }[];

  /** deploy/kubernetes with the monitoring component listed, as kustomization.yaml's comment says to. */
  function withMonitoring(t: TestContext): any[] {
    const { base } = checkoutCopy(t);
    const file = join(base, 'kustomization.yaml');
    const text = readFileSync(file, 'utf8');
    const listed = text.replace(/^# components:\n# {3}- monitoring$/m, 'components:\n  - monitoring');
    assert.notEqual(listed, text, 'kustomization.yaml holds the two commented lines that list monitoring/');
    writeFileSync(file, listed);
    return render(base);
  }

  test('a fresh checkout renders, and every object is valid against the Kubernetes schemas', (t) => {
    const fresh = checkoutCopy(t).base;
    assert.ok(!existsSync(join(fresh, 'secret.env')), 'the copy is a fresh checkout');
    assert.deepEqual(render(fresh), objects, 'what renders does not depend on secret.env');
    assert.deepEqual(objects.map(kindKey).sort(), Object.keys(KINDS).sort(), 'one object of each kind');
    for (const doc of objects) assert.doesNotThrow(() => new KINDS[kindKey(doc)]!.model(doc).validate(), kindKey(doc));
    // The schemas do see a wrong value.
    const broken = structuredClone(deployment);
    broken.spec.template.spec.terminationGracePeriodSeconds = 'twenty';
    assert.throws(() => new Deployment(broken).validate(), /terminationGracePeriodSeconds/);
    // Every manifest file is rendered: none is left out of kustomization.yaml (the PodMonitor is the
    // monitoring component's, listed on demand).
    const rendered = new Set([...objects, ...withMonitoring(t)].map((d) => `${d.kind}/${d.metadata.labels?.['app.kubernetes.io/name']}`));
    for (const file of manifestFiles()) {
      const doc = parse(readFileSync(file, 'utf8'));
      assert.ok(rendered.has(`${doc.kind}/${doc.metadata.labels?.['app.kubernetes.io/name']}`), `${file} is rendered`);
    }
  });

  test('no object has a field the Kubernetes API does not know', () => {
    assert.deepEqual(typeErrors(objects), []);
    // The check sees a misspelt field, which the schemas let through.
    const misspelt = structuredClone(deployment);
    misspelt.spec.template.spec.containers[0].readinesProbe = misspelt.spec.template.spec.containers[0].readinessProbe;
    assert.doesNotThrow(() => new Deployment(misspelt).validate());
    const errors = typeErrors([misspelt]);
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0]!, /readinesProbe\W* does not exist in type 'IContainer'/);
  });

  test('the image is named once, in kustomization.yaml, with the package version as its tag', () => {
    assert.equal(kustomization.images.length, 1);
    assert.equal(image!.newTag, version, `the tag is the package's version ${version}`);
    const named = `${image!.newName}:${image!.newTag}`;
    assert.equal(container.image, named);
    assert.equal(jobContainer.image, named, 'the Job migrates for the image the Deployment runs');
    // The files name only the image kustomize replaces: a registry or a tag there would be a second place.
    for (const file of manifestFiles()) {
      const images = [...readFileSync(file, 'utf8').matchAll(/^\s*image:\s*(\S+)/gm)].map((m) => m[1]);
      for (const name of images) assert.equal(name, image!.name, `${file} names the image only as ${image!.name}`);
    }
  });

  test('no Secret is rendered: the pods read the one the operator makes from secret.env, which git ignores', () => {
    assert.deepEqual(
      objects.filter((d) => d.kind === 'Secret'),
      [],
    );
    for (const file of manifestFiles()) assert.notEqual(parse(readFileSync(file, 'utf8')).kind, 'Secret', file);
    const referenced = [...container.env, ...jobContainer.env].flatMap((e: EnvVar) =>
      e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef] : [],
    );
    assert.deepEqual(new Set(referenced.map((r) => r.name)), new Set([SECRET_NAME]));
    assert.deepEqual(
      [...new Set(referenced.map((r) => r.key))].sort(),
      Object.keys(secretExample).sort(),
      'the example has every key used, and only those',
    );
    for (const [key, value] of Object.entries(secretExample)) assert.match(value, /CHANGE-ME/, `${key} in the example is no real URL`);
    const ignored = (path: string) => spawnSync('git', ['check-ignore', '-q', path], { cwd: ROOT }).status === 0;
    assert.ok(ignored('deploy/kubernetes/secret.env'), 'git ignores the operator copy');
    assert.ok(!ignored('deploy/kubernetes/secret.env.example'), 'the example is committed');
    assert.match(
      docsScript('kubectl create secret generic'),
      new RegExp(`^kubectl create secret generic ${SECRET_NAME} --from-env-file=deploy/kubernetes/secret.env$`, 'm'),
    );
  });

  test('every release has a migration Job of its own, which Helm and Argo CD run first', (t) => {
    const jobName = `petstore-migration-to-${version}`;
    assert.equal(job.metadata.name, jobName, 'the name carries the tag');
    // A DNS subdomain the Job controller can also put in its pods' job-name label (63 characters).
    assert.match(job.metadata.name, /^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/);
    // The next release: its tag written where the docs say, once. Its Job is another; every other
    // object keeps its name, so it is changed in place.
    const { base } = checkoutCopy(t);
    const file = join(base, 'kustomization.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace(`newTag: ${version}`, 'newTag: 1.1.0'));
    const next = render(base);
    assert.equal(one(next, 'batch/v1 Job').metadata.name, 'petstore-migration-to-1.1.0');
    const names = (docs: any[]) => docs.filter((d) => d.kind !== 'Job').map((d) => `${d.kind}/${d.metadata.name}`);
    assert.deepEqual(names(next), names(objects));
    for (const doc of next.filter((d) => d.spec?.template))
      assert.equal(doc.spec.template.spec.containers[0].image, `${image!.newName}:1.1.0`);
    // An overlay that sets its own tag, with the base's replacements entry after it, names its Job after its tag.
    const overlay = join(checkoutCopy(t).root, 'overlay');
    mkdirSync(overlay);
    writeFileSync(
      join(overlay, 'kustomization.yaml'),
      stringify({
        resources: ['../deploy/kubernetes'],
        images: [{ name: image!.newName, newTag: '1.2.0-rc.1' }],
        replacements: kustomization.replacements,
      }),
    );
    const overlaid = one(render(overlay), 'batch/v1 Job');
    assert.equal(overlaid.metadata.name, 'petstore-migration-to-1.2.0-rc.1');
    assert.equal(overlaid.spec.template.spec.containers[0].image, `${image!.newName}:1.2.0-rc.1`);

    assert.deepEqual(job.metadata.annotations, {
      'helm.sh/hook': 'pre-install,pre-upgrade',
      'helm.sh/hook-delete-policy': 'before-hook-creation',
      'argocd.argoproj.io/hook': 'PreSync',
      'argocd.argoproj.io/hook-delete-policy': 'BeforeHookCreation',
    });
    // It ends, failed, within its deadline, which leaves room for each try to wait for the migration lock.
    const tries = job.spec.backoffLimit + 1;
    assert.ok(tries >= 2 && tries <= 3, `${tries} tries`);
    assert.ok(
      job.spec.activeDeadlineSeconds * 1000 >= tries * config.migrationLockWaitMs,
      `activeDeadlineSeconds (${job.spec.activeDeadlineSeconds} s) holds ${tries} waits of MIGRATION_LOCK_WAIT_MS`,
    );
    assert.ok(job.spec.ttlSecondsAfterFinished >= 3600, 'its logs stay for a while');
  });

  test("every selector takes the Deployment's pods, and none the migration Job's", (t) => {
    const podMonitor = one(withMonitoring(t), POD_MONITOR);
    const selectors: [string, Record<string, string>][] = [
      ['the Deployment', deployment.spec.selector.matchLabels],
      ['the Service', service.spec.selector],
      ['the PodDisruptionBudget', pdb.spec.selector.matchLabels],
      ['the NetworkPolicy', policy.spec.podSelector.matchLabels],
      ['the spread', pod.topologySpreadConstraints[0].labelSelector.matchLabels],
      ['the PodMonitor', podMonitor.spec.selector.matchLabels],
    ];
    for (const [what, selector] of selectors) {
      assert.ok(selects(selector, podLabels), `${what} selects the Deployment's pods`);
      assert.ok(!selects(selector, jobLabels), `${what} does not select the migration Job's pod`);
      assert.deepEqual(
        Object.keys(selector).sort(),
        ['app.kubernetes.io/component', 'app.kubernetes.io/name'],
        `${what}: name and component`,
      );
    }
    // Even a selector of the name label alone, written elsewhere, tells them apart.
    const name = 'app.kubernetes.io/name';
    assert.notEqual(jobLabels[name], podLabels[name]);
    assert.equal(jobLabels[name], 'petstore-migration');
    assert.equal(jobLabels['app.kubernetes.io/part-of'], 'petstore');
    assert.equal(podLabels['app.kubernetes.io/part-of'], 'petstore');
    // part-of is on every object, and in no selector (a Deployment's cannot change once it exists).
    for (const doc of objects) assert.equal(doc.metadata.labels['app.kubernetes.io/part-of'], 'petstore', doc.kind);
    for (const [what, selector] of selectors) assert.ok(!('app.kubernetes.io/part-of' in selector), what);
    const named = containerPorts.map((p) => p.name);
    for (const port of service.spec.ports)
      assert.ok(named.includes(port.targetPort), `the Service targets the container's port named ${port.targetPort}`);
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

  test('TRUST_PROXY counts the one proxy in front, the ingress controller, the only client the NetworkPolicy admits to the API', () => {
    assert.deepEqual(config.trustProxy, { kind: 'hops', hops: 1 });
    // The hop count holds only if nothing but the controller reaches the port: every rule that admits
    // it names its peers, each a namespace and pods in it.
    const http = containerPorts.find((p) => p.name === 'http')!;
    const admitting = (policy.spec.ingress as any[]).filter((rule) =>
      (rule.ports ?? [{}]).some((p: any) => p.port === undefined || p.port === http.name || p.port === http.containerPort),
    );
    assert.equal(admitting.length, 1);
    const peers = admitting[0].from as any[];
    assert.ok(peers.length > 0, 'a rule with no peers admits everyone');
    for (const peer of peers) {
      assert.equal(peer.namespaceSelector.matchLabels['kubernetes.io/metadata.name'], 'ingress-nginx');
      assert.equal(peer.podSelector.matchLabels['app.kubernetes.io/name'], 'ingress-nginx');
    }
    assert.equal(ingress.spec.ingressClassName, 'nginx', 'the controller the policy admits is the one the Ingress names');
  });

  test("the Ingress sends every request to the Service's http port, and caps connections as the instances would", () => {
    const servicePort = (service.spec.ports as { name: string; targetPort: string }[]).find((p) => p.targetPort === 'http')!;
    const hosts = new Set<string>();
    for (const rule of ingress.spec.rules) {
      hosts.add(rule.host);
      assert.deepEqual(
        rule.http.paths.map((p: any) => [p.path, p.pathType]),
        [['/', 'Prefix']],
        'every path',
      );
      for (const { backend } of rule.http.paths) {
        assert.equal(backend.service.name, service.metadata.name);
        assert.equal(backend.service.port.name, servicePort.name);
      }
    }
    assert.deepEqual(new Set(ingress.spec.tls.flatMap((entry: any) => entry.hosts)), hosts, 'TLS for every host');
    const annotations = ingress.metadata.annotations as Record<string, string>;
    // The instances exempt their trusted proxy from MAX_CONNECTIONS_PER_ADDRESS: the controller caps each client instead.
    assert.equal(Number(annotations['nginx.ingress.kubernetes.io/limit-connections']), config.maxConnectionsPerAddress);
    assert.match(read('deploy/nginx.conf'), new RegExp(`limit_conn per_client ${config.maxConnectionsPerAddress};`));
    assert.match(
      read('deploy/nginx.conf'),
      new RegExp(`proxy_connect_timeout ${annotations['nginx.ingress.kubernetes.io/proxy-connect-timeout']}s;`),
    );
  });

  test("the NetworkPolicy admits each of the container's ports, from its one peer", () => {
    assert.deepEqual(policy.spec.policyTypes, ['Ingress'], 'egress left open (docs/operations.md)');
    const admitted = new Map<string, any[]>();
    for (const rule of policy.spec.ingress) {
      for (const { port, protocol } of rule.ports) {
        assert.equal(protocol, 'TCP');
        const target = containerPorts.find((p) => p.name === port || p.containerPort === port);
        assert.ok(target, `the policy's port ${port} is a container port`);
        admitted.set(target.name, rule.from);
      }
    }
    assert.deepEqual([...admitted.keys()].sort(), containerPorts.map((p) => p.name).sort(), 'every container port is admitted');
    assert.deepEqual(admitted.get('metrics'), [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
      },
    ]);
  });

  test('the instances spread over the nodes, as a preference', () => {
    assert.deepEqual(pod.topologySpreadConstraints, [
      {
        maxSkew: 1,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'ScheduleAnyway',
        labelSelector: { matchLabels: deployment.spec.selector.matchLabels },
        matchLabelKeys: ['pod-template-hash'],
      },
    ]);
    assert.ok(deployment.spec.replicas >= 2);
  });

  test('Prometheus scrapes each instance on its port metrics as job "petstore": a PodMonitor, or the annotations', async (t) => {
    // The base leaves the PodMonitor out, so that it applies where the Prometheus Operator's CRD is missing.
    assert.deepEqual(
      objects.filter((d) => kindKey(d) === POD_MONITOR),
      [],
    );
    const podMonitor = one(withMonitoring(t), POD_MONITOR);
    assert.deepEqual(podMonitorProblems(podMonitor), []);
    // The check sees a misspelt field, a missing selector and an endpoint without a port.
    const broken = structuredClone(podMonitor);
    broken.spec.podMetricEndpoints = broken.spec.podMetricsEndpoints;
    delete broken.spec.selector;
    broken.spec.podMetricsEndpoints[0].targetPort = broken.spec.podMetricsEndpoints[0].port;
    delete broken.spec.podMetricsEndpoints[0].port;
    assert.deepEqual(podMonitorProblems(broken), [
      'spec.podMetricEndpoints is not a field',
      'spec.selector.matchLabels is required',
      'spec.podMetricsEndpoints[0].port names no port',
    ]);

    const [endpoint] = podMonitor.spec.podMetricsEndpoints;
    const metrics = containerPorts.find((p) => p.name === endpoint.port);
    assert.ok(metrics, `the PodMonitor's port ${endpoint.port} is a container port`);
    assert.equal(metrics.containerPort, config.metricsPort);
    // The job label comes from the pods' label: the job the alert rules select.
    const jobName = podLabels[podMonitor.spec.jobLabel];
    assert.equal(jobName, 'petstore');
    assert.match(read('deploy/prometheus/alerts.yml'), new RegExp(`job="${jobName}"`));
    const annotations = deployment.spec.template.metadata.annotations as Record<string, string>;
    assert.deepEqual(annotations, {
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(config.metricsPort),
      'prometheus.io/path': endpoint.path,
    });
    // The path is the server's metrics page (asked here with the token the public listener wants).
    const token = 'k8s-test-metrics-token';
    const server = await startTestServer({ metricsToken: token }, { owner: t });
    assert.equal((await fetch(server.url + endpoint.path, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  });

  test("the container port is the server's PORT, and the image's; the metrics port is METRICS_PORT", () => {
    const ports = Object.fromEntries(containerPorts.map((p) => [p.name, p.containerPort]));
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

  test("the Deployment's settings are compose's, where both set one", () => {
    const compose = parse(read('compose.yaml')) as { services: Record<string, { environment?: Record<string, string> }> };
    const composeEnv = compose.services['api-1']!.environment!;
    const literal = (container.env as EnvVar[]).filter((e) => e.valueFrom === undefined && e.name in composeEnv);
    assert.ok(literal.length >= 6, literal.map((e) => e.name).join(' '));
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

  test("docs/operations.md's scripts, run by kubectl against a stand-in API server", async (t) => {
    const api = await standInApi(t);
    const { root, base } = checkoutCopy(t);
    const run = (script: string) => runScript(t, script, root, api.url);

    // The Secret, once: the keys of the operator's file.
    const secret = await run(docsScript('kubectl create secret generic'));
    assert.equal(secret.code, 0, secret.output);
    const [created] = api.events.filter((e) => e.verb === 'POST');
    assert.deepEqual([created?.kind, created?.name], ['Secret', SECRET_NAME]);
    for (const key of Object.keys(secretExample)) assert.ok(created!.body.includes(key), `the Secret holds ${key}`);

    const release = docsScript('kubectl apply -k deploy/kubernetes -l');
    // A release whose Job fails: the wait ends at once, with the Job's log, and nothing else is applied.
    api.outcomes.set(job.metadata.name, { polls: 1, type: 'Failed' });
    const started = Date.now();
    const failed = await run(release);
    assert.notEqual(failed.code, 0, failed.output);
    assert.ok(Date.now() - started < 60_000, 'the wait ends with the Job, not at a timeout');
    assert.match(failed.output, /migration 9 \(stand-in\) failed/);
    assert.match(failed.output, new RegExp(`job.batch/${job.metadata.name} failed`));
    assert.deepEqual(api.applied(), [`Job/${job.metadata.name}`], 'only the Job was applied');

    // The same release once its migration succeeds (the failed Job deleted, as an operator would).
    api.remove('Job', job.metadata.name);
    api.outcomes.set(job.metadata.name, { polls: 2, type: 'Complete' });
    api.events.length = 0;
    const done = await run(release);
    assert.equal(done.code, 0, done.output);
    const order = api.events.map((e) => `${e.verb} ${e.kind}/${e.name}`);
    const completeAt = order.indexOf(`Complete Job/${job.metadata.name}`);
    assert.ok(completeAt > order.indexOf(`POST Job/${job.metadata.name}`));
    assert.ok(
      order.indexOf('POST Deployment/petstore') > completeAt,
      `the Deployment changes only once the Job has completed: ${order.join(', ')}`,
    );
    assert.deepEqual(
      api.applied().sort(),
      objects.map((d) => `${d.kind}/${d.metadata.name}`).sort(),
      'then everything rendered is applied',
    );

    // The next release: a Job of its own, and no change asked of the previous one (the API refuses it).
    const file = join(base, 'kustomization.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace(`newTag: ${version}`, 'newTag: 1.1.0'));
    api.outcomes.set('petstore-migration-to-1.1.0', { polls: 1, type: 'Complete' });
    api.events.length = 0;
    const next = await run(release);
    assert.equal(next.code, 0, next.output);
    assert.deepEqual(
      api.events.filter((e) => e.verb === 'POST').map((e) => `${e.kind}/${e.name}`),
      ['Job/petstore-migration-to-1.1.0'],
    );
    assert.deepEqual(
      api.events.filter((e) => e.verb === 'PATCH' && e.kind === 'Job'),
      [],
    );
    const patched = api.events.find((e) => e.verb === 'PATCH' && e.kind === 'Deployment');
    assert.ok(patched?.body.includes(`${image!.newName}:1.1.0`), 'the Deployment rolls to the new image');
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
});

/** A shell script run in a checkout root with kubectl pointed at the stand-in API server. */
async function runScript(t: TestContext, script: string, cwd: string, server: string): Promise<{ code: number | null; output: string }> {
  const home = tempDir(t);
  const bin = join(home, 'bin');
  mkdirSync(bin);
  // The stand-in has no OpenAPI document for kubectl apply to validate against; a cluster's API server
  // validates what it is sent itself.
  writeFileSync(
    join(bin, 'kubectl'),
    `#!/bin/sh\nif [ "$1" = apply ]; then shift; exec '${KUBECTL}' apply --validate=false "$@"; fi\nexec '${KUBECTL}' "$@"\n`,
  );
  chmodSync(join(bin, 'kubectl'), 0o755);
  writeFileSync(
    join(home, 'kubeconfig'),
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stand-in', cluster: { server } }],
      users: [{ name: 'operator', user: {} }],
      contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'operator', namespace: 'default' } }],
      'current-context': 'stand-in',
    }),
  );
  // A group of its own, so that a script still waiting (kubectl included) is stopped whole.
  const child = spawn('sh', ['-c', script], {
    cwd,
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: home, KUBECONFIG: join(home, 'kubeconfig'), KUBECACHEDIR: join(home, 'cache') },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  killGroupAtExit(child.pid!);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => killGroup(child.pid!), 90_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  killGroup(child.pid!);
  return { code, output };
}

interface ApiEvent {
  /** POST, PATCH, or the terminal condition a Job's status first showed. */
  verb: string;
  kind: string;
  name: string;
  body: string;
}

/**
 * An API server as far as the docs' scripts need one: discovery of the kinds rendered, objects stored
 * as they are created (POST) and read back (GET), a change to a Job refused as the API refuses a change
 * to its pod template, a Job's status reaching the outcome set for it after so many reads, and its pod
 * and log. No controller runs: nothing else happens.
 */
async function standInApi(t: TestContext) {
  const RESOURCES: [groupVersion: string, plural: string, kind: string][] = [
    ['v1', 'services', 'Service'],
    ['v1', 'secrets', 'Secret'],
    ['v1', 'pods', 'Pod'],
    ['apps/v1', 'deployments', 'Deployment'],
    ['batch/v1', 'jobs', 'Job'],
    ['policy/v1', 'poddisruptionbudgets', 'PodDisruptionBudget'],
    ['networking.k8s.io/v1', 'ingresses', 'Ingress'],
    ['networking.k8s.io/v1', 'networkpolicies', 'NetworkPolicy'],
  ];
  const stored = new Map<string, any>();
  const reads = new Map<string, number>();
  const events: ApiEvent[] = [];
  const outcomes = new Map<string, { polls: number; type: 'Complete' | 'Failed' }>();
  const send = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const notFound = (res: ServerResponse) =>
    send(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: 'not found' });

  function jobStatus(name: string): any {
    const outcome = outcomes.get(name);
    const count = (reads.get(name) ?? 0) + 1;
    reads.set(name, count);
    if (!outcome || count < outcome.polls) return { active: 1 };
    // As Kubernetes 1.31 and later report it: the target condition, then the terminal one.
    const before = outcome.type === 'Complete' ? 'SuccessCriteriaMet' : 'FailureTarget';
    if (count === outcome.polls) events.push({ verb: outcome.type, kind: 'Job', name, body: '' });
    return {
      [outcome.type === 'Complete' ? 'succeeded' : 'failed']: 1,
      conditions: [
        { type: before, status: 'True' },
        { type: outcome.type, status: 'True' },
      ],
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const path = new URL(req.url!, 'http://stand-in').pathname;
    if (path === '/version') return send(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0' });
    if (path === '/api') return send(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    const groupVersions = [...new Set(RESOURCES.map(([gv]) => gv))];
    if (path === '/apis') {
      const groups = groupVersions
        .filter((gv) => gv !== 'v1')
        .map((gv) => ({ name: gv.split('/')[0], versions: [{ groupVersion: gv, version: gv.split('/')[1] }] }))
        .map((g) => ({ ...g, preferredVersion: g.versions[0] }));
      return send(res, 200, { kind: 'APIGroupList', apiVersion: 'v1', groups });
    }
    const prefix = (gv: string) => (gv === 'v1' ? '/api/v1' : `/apis/${gv}`);
    for (const gv of groupVersions) {
      if (path !== prefix(gv)) continue;
      const resources = RESOURCES.filter(([g]) => g === gv).map(([, name, kind]) => ({
        name,
        singularName: '',
        namespaced: true,
        kind,
        verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
      }));
      return send(res, 200, { kind: 'APIResourceList', groupVersion: gv, resources });
    }
    const resource = RESOURCES.find(([gv, plural]) => path.startsWith(`${prefix(gv)}/namespaces/default/${plural}`));
    if (!resource) return notFound(res);
    const [groupVersion, plural, kind] = resource;
    const [name, sub] = path.slice(`${prefix(groupVersion)}/namespaces/default/${plural}/`.length).split('/');
    const key = `${kind}/${name}`;
    if (req.method === 'POST') {
      const json = (req.headers['content-type'] ?? '').includes('json');
      const object = json ? JSON.parse(body.toString()) : { apiVersion: groupVersion, kind, metadata: { name: SECRET_NAME } };
      object.metadata.namespace = 'default';
      object.metadata.uid = `uid-${object.metadata.name}`;
      if (kind === 'Job') object.spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': object.metadata.uid } };
      stored.set(`${kind}/${object.metadata.name}`, object);
      events.push({ verb: 'POST', kind, name: object.metadata.name, body: body.toString('latin1') });
      return send(res, 201, object);
    }
    if (req.method === 'PATCH') {
      if (!stored.has(key)) return notFound(res);
      events.push({ verb: 'PATCH', kind, name: name!, body: body.toString() });
      if (kind === 'Job')
        return send(res, 422, {
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          reason: 'Invalid',
          code: 422,
          message: 'field is immutable',
        });
      return send(res, 200, stored.get(key));
    }
    if (kind === 'Pod') {
      // The Job's pod, for `kubectl logs job/...`, and its log: the line petstore migrate ends with.
      const jobs = [...stored.values()].filter((o) => o.kind === 'Job');
      const pods = jobs.map((j) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `${j.metadata.name}-x7k2p`, namespace: 'default', labels: j.spec.selector.matchLabels },
        spec: { containers: j.spec.template.spec.containers },
        status: { phase: outcomes.get(j.metadata.name)?.type === 'Complete' ? 'Succeeded' : 'Failed' },
      }));
      if (sub === 'log') {
        const failed = pods.find((p) => p.metadata.name === name)?.status.phase === 'Failed';
        res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(failed ? 'migration 9 (stand-in) failed: a failure line\n' : 'Migrated the database from version 8 to version 9\n');
        return;
      }
      if (name)
        return pods.some((p) => p.metadata.name === name)
          ? send(
              res,
              200,
              pods.find((p) => p.metadata.name === name),
            )
          : notFound(res);
      const selector = new URL(req.url!, 'http://stand-in').searchParams.get('labelSelector') ?? '';
      const items = pods.filter((p) => Object.entries(p.metadata.labels).every(([k, v]) => selector.includes(`${k}=${v as string}`)));
      return send(res, 200, { apiVersion: 'v1', kind: 'PodList', metadata: {}, items });
    }
    const object = stored.get(key);
    if (!object) return notFound(res);
    return send(res, 200, kind === 'Job' ? { ...object, status: jobStatus(name!) } : object);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => send(res, 500, { message: String(err) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  atEnd(t, () => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    events,
    outcomes,
    /** What has been created, as Kind/name, the Secret aside. */
    applied: () => [...stored.values()].filter((o) => o.kind !== 'Secret').map((o) => `${o.kind}/${o.metadata.name}`),
    remove(kind: string, name: string) {
      stored.delete(`${kind}/${name}`);
      reads.delete(name);
    },
  };
}
