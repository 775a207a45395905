/**
 * What operators deploy besides the image (docs/containers.md): the kustomize overlays, rendered
 * by `kubectl kustomize` (skipped, with the reason, where no kubectl with kustomize 4 or later is
 * on PATH), the compose file, and the Grafana dashboard and Prometheus alert rules, whose every
 * metric must be one the service's /metrics serves.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const VERSION = (JSON.parse(read('package.json')) as { version: string }).version;
/** The image's user, as its Dockerfile sets it (`USER uid:gid`). */
const IMAGE_USER = /^USER (\d+):(\d+)$/m.exec(read('Dockerfile'))!.slice(1).map(Number);

/** Why the rendering tests cannot run here, or null when they can. */
function kustomizeMissing(): string | null {
  const probe = spawnSync('kubectl', ['version', '--client', '--output=json'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (probe.error || probe.status !== 0) return 'kubectl is not on PATH';
  const kustomize = (JSON.parse(probe.stdout) as { kustomizeVersion?: string }).kustomizeVersion;
  const major = Number(/^v?(\d+)/.exec(kustomize ?? '')?.[1] ?? 0);
  return major >= 4
    ? null
    : `kubectl's kustomize is ${kustomize ?? 'unknown'}; 4 or later is needed`;
}

// Files, not the service's behaviour on a database: one run, in the sqlite project.
const once = TEST_DATABASE === 'sqlite';
const missing = once ? kustomizeMissing() : 'runs in the sqlite project only';
const withKustomize = missing ? describe.skip : describe;
const onceOnly = once ? describe : describe.skip;

type Doc = Record<string, any>;

function render(overlay: string): Doc[] {
  const run = spawnSync(
    'kubectl',
    ['kustomize', join(ROOT, 'deploy/kubernetes/overlays', overlay)],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  if (run.status !== 0) throw new Error(`kubectl kustomize ${overlay}: ${run.stderr}`);
  return parseAllDocuments(run.stdout).map((doc) => doc.toJS() as Doc);
}

const only = (docs: Doc[], kind: string): Doc[] => docs.filter((d) => d.kind === kind);
function one(docs: Doc[], kind: string, name?: string): Doc {
  const found = only(docs, kind).filter((d) => name === undefined || d.metadata.name === name);
  expect(found.map((d) => `${kind}/${d.metadata.name}`)).toHaveLength(1);
  return found[0];
}
const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([key, value]) => labels[key] === value);

if (missing) {
  process.stderr.write(`test/deploy.test.ts: the kustomize overlays are skipped: ${missing}\n`);
  test.skip(`kustomize overlays: skipped, ${missing}`, () => undefined);
}

withKustomize.each(['sqlite', 'postgres'])('kustomize overlay %s', (overlay) => {
  let docs: Doc[];
  let deployment: Doc;
  let pod: Doc;
  let container: Doc;

  beforeAll(() => {
    docs = render(overlay);
    deployment = one(docs, 'Deployment', 'planfence');
    pod = deployment.spec.template.spec;
    expect(pod.containers).toHaveLength(1);
    container = pod.containers[0];
  });

  test('the image npm run image tags, serving on the named port http', () => {
    expect(container.image).toBe(`planfence:${VERSION}`);
    expect(container.args ?? ['serve']).toEqual(['serve']);
    expect(container.ports).toEqual([{ name: 'http', containerPort: 4000 }]);
  });

  test('readiness, liveness and start-up probes ask /health, with room for a busy service', () => {
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      expect({ probe, httpGet: container[probe]?.httpGet }).toEqual({
        probe,
        httpGet: { path: '/health', port: 'http' },
      });
      // docs/operations.md: /health waits its turn behind large plans (p99 up to 1.2 s).
      expect(container[probe].timeoutSeconds).toBeGreaterThanOrEqual(5);
      expect(container[probe].failureThreshold).toBeGreaterThanOrEqual(3);
    }
    // Start-up: migrations, and on PostgreSQL 10 connection attempts 3 s apart.
    const startup = container.startupProbe;
    expect(startup.periodSeconds * startup.failureThreshold).toBeGreaterThanOrEqual(60);
    // SIGTERM's deadline (10 s) fits in the grace period.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(12);
  });

  test('runs as the image user, not root, on a read-only root file system; /data and /tmp the only writable mounts', () => {
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: IMAGE_USER[0],
      runAsGroup: IMAGE_USER[1],
      fsGroup: IMAGE_USER[1],
    });
    expect(IMAGE_USER[0]).not.toBe(0);
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const writable = (container.volumeMounts as Doc[])
      .filter((mount) => !mount.readOnly)
      .map((mount) => mount.mountPath as string)
      .sort();
    expect(writable).toEqual(['/data', '/tmp']);
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  test('every secret and config map it references exists, with the keys it names', () => {
    const secrets = new Map(
      only(docs, 'Secret').map((s) => [
        s.metadata.name as string,
        new Set([...Object.keys(s.data ?? {}), ...Object.keys(s.stringData ?? {})]),
      ]),
    );
    const configMaps = new Set(only(docs, 'ConfigMap').map((c) => c.metadata.name as string));
    const references: string[] = [];
    for (const env of (container.env ?? []) as Doc[]) {
      const ref = env.valueFrom?.secretKeyRef;
      if (!ref) continue;
      references.push(`${env.name} <- ${ref.name}/${ref.key}`);
      expect({ env: env.name, key: secrets.get(ref.name)?.has(ref.key) }).toEqual({
        env: env.name,
        key: true,
      });
    }
    for (const from of (container.envFrom ?? []) as Doc[]) {
      if (from.configMapRef) expect(configMaps.has(from.configMapRef.name)).toBe(true);
      if (from.secretRef) expect(secrets.has(from.secretRef.name)).toBe(true);
    }
    for (const volume of pod.volumes as Doc[]) {
      if (!volume.secret) continue;
      for (const item of volume.secret.items ?? [])
        expect(secrets.get(volume.secret.secretName)?.has(item.key)).toBe(true);
    }
    // The tokens come from the Secret, never from a literal value.
    expect(references).toEqual(
      expect.arrayContaining([
        'PLANFENCE_ADMIN_TOKEN <- planfence-secrets/PLANFENCE_ADMIN_TOKEN',
        'PLANFENCE_METRICS_TOKEN <- planfence-secrets/PLANFENCE_METRICS_TOKEN',
      ]),
    );
    for (const env of (container.env ?? []) as Doc[])
      expect({ env: env.name, literal: /TOKEN|PASSWORD/.test(env.name) && 'value' in env }).toEqual(
        {
          env: env.name,
          literal: false,
        },
      );
    // No credential ships with the manifests: the base's Secret is empty until filled.
    const shipped = one(docs, 'Secret', 'planfence-secrets');
    expect(shipped.stringData.PLANFENCE_ADMIN_TOKEN).toBe('');
    expect(shipped.stringData.PLANFENCE_METRICS_TOKEN).toBe('');
  });

  test('the Service and the PodDisruptionBudget select its pods; requests and a memory limit are set', () => {
    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    expect(matches(deployment.spec.selector.matchLabels, labels)).toBe(true);
    const service = one(docs, 'Service', 'planfence');
    expect(matches(service.spec.selector, labels)).toBe(true);
    expect(service.spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http' }]);
    const budget = one(docs, 'PodDisruptionBudget', 'planfence');
    expect(matches(budget.spec.selector.matchLabels, labels)).toBe(true);
    expect(budget.spec.maxUnavailable).toBe(1);
    const { requests, limits } = container.resources;
    expect(requests.cpu).toBeDefined();
    // docs/BENCHMARKS.md: 126 MiB resident at rest, 192 MiB at the heaviest load measured.
    expect(mebibytes(requests.memory)).toBeGreaterThanOrEqual(192);
    expect(mebibytes(limits.memory)).toBeGreaterThan(mebibytes(requests.memory));
  });

  if (overlay === 'sqlite') {
    test('SQLite: one replica, replaced not rolled, its database on the PersistentVolumeClaim', () => {
      expect(deployment.spec.replicas).toBe(1);
      expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
      const data = (pod.volumes as Doc[]).find((v) => v.name === 'data')!;
      expect(data).toEqual({
        name: 'data',
        persistentVolumeClaim: { claimName: 'planfence-data' },
      });
      const claim = one(docs, 'PersistentVolumeClaim', 'planfence-data');
      expect(claim.spec.accessModes).toEqual(['ReadWriteOnce']);
      const url = (container.env as Doc[]).find((e) => e.name === 'DATABASE_URL');
      expect(url).toEqual({ name: 'DATABASE_URL', value: 'sqlite:/data/planfence.db' });
    });
  } else {
    test('PostgreSQL: several replicas, rolled one at a time, DATABASE_URL from its Secret', () => {
      expect(deployment.spec.replicas).toBeGreaterThanOrEqual(2);
      expect(deployment.spec.strategy).toEqual({
        type: 'RollingUpdate',
        rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
      });
      const url = (container.env as Doc[]).find((e) => e.name === 'DATABASE_URL');
      expect(url).toEqual({
        name: 'DATABASE_URL',
        valueFrom: { secretKeyRef: { name: 'planfence-database', key: 'DATABASE_URL' } },
      });
      expect(only(docs, 'PersistentVolumeClaim')).toEqual([]);
    });
  }
});

function mebibytes(quantity: string): number {
  const [, number, unit] = /^(\d+)(Mi|Gi)$/.exec(quantity)!;
  return Number(number) * (unit === 'Gi' ? 1024 : 1);
}

onceOnly('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as Doc;
  const instances = Object.entries(compose.services as Record<string, Doc>).filter(([, s]) =>
    String(s.image).includes('planfence'),
  );

  test('two planfence instances on PostgreSQL 15, each on its own port, read-only, after the database is healthy', () => {
    expect(instances.map(([name]) => name)).toEqual(['planfence-1', 'planfence-2']);
    expect(compose.services.postgres.image).toMatch(/^postgres:15\b/);
    expect(compose.services.postgres.healthcheck.test).toContain('pg_isready');
    const ports = instances.map(([, s]) => s.ports[0] as string);
    expect(new Set(ports).size).toBe(2);
    for (const [, service] of instances) {
      expect(service.read_only).toBe(true);
      expect(service.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
      expect(service.environment.PLANFENCE_ENV_DIR).toBe('/run/secrets');
    }
  });

  test('the admin token, the database URL and the OIDC configuration are secrets, never environment values', () => {
    for (const [, service] of instances) {
      const targets = (service.secrets as Doc[]).map((s) => `${s.source}->${s.target}`);
      expect(targets.sort()).toEqual([
        'admin_token->PLANFENCE_ADMIN_TOKEN',
        'database_url->DATABASE_URL',
        'oidc_config->oidc.json',
      ]);
      expect(Object.keys(service.environment)).not.toContain('PLANFENCE_ADMIN_TOKEN');
      expect(Object.keys(service.environment)).not.toContain('DATABASE_URL');
    }
  });

  test('init-secrets.sh writes every secret file the compose file reads, and keeps existing ones', () => {
    const dir = scratchDir();
    try {
      const run = () =>
        spawnSync('bash', [join(ROOT, 'deploy/compose/init-secrets.sh'), dir.path], {
          encoding: 'utf8',
        });
      expect(run().status).toBe(0);
      const files = Object.values(compose.secrets as Record<string, { file: string }>).map(
        (s) => s.file,
      );
      expect(files.every((f) => f.startsWith('deploy/compose/secrets/'))).toBe(true);
      expect(readdirSync(dir.path).sort()).toEqual(
        files.map((f) => f.slice('deploy/compose/secrets/'.length)).sort(),
      );
      const token = readFileSync(join(dir.path, 'admin-token'), 'utf8');
      expect(token).toMatch(/^pf_[\w-]{32}$/);
      const password = readFileSync(join(dir.path, 'postgres-password'), 'utf8');
      expect(readFileSync(join(dir.path, 'database-url'), 'utf8')).toBe(
        `postgres://planfence:${password}@postgres:5432/planfence`,
      );
      expect(run().stdout).toContain('kept');
      expect(readFileSync(join(dir.path, 'admin-token'), 'utf8')).toBe(token);
    } finally {
      dir.cleanup();
    }
  });
});

/** PromQL words that are not metric names. */
const PROMQL_WORDS = new Set(
  'and or unless bool offset by without on ignoring group_left group_right inf nan'.split(' '),
);

/**
 * The metric names a PromQL expression reads: what is left once strings, label matchers, ranges,
 * label lists, functions and keywords are taken out.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const match of bare.matchAll(/(?<![\w:.$])[a-zA-Z_:][\w:]*/g)) {
    const after = bare.slice(match.index + match[0].length).trimStart();
    if (after.startsWith('(') || PROMQL_WORDS.has(match[0])) continue;
    names.push(match[0]);
  }
  return names;
}

/** Metrics the rules read that come from Prometheus or an exporter, not from planfence. */
const EXTERNAL = {
  up: 'Prometheus: whether the last scrape of the target succeeded',
  probe_success: "the blackbox exporter's probe of /health (storage unavailable)",
};

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; description: string };
}

onceOnly('Grafana dashboard and Prometheus alert rules', () => {
  const dashboard = JSON.parse(read('deploy/grafana/planfence-dashboard.json')) as Doc;
  const panels = (dashboard.panels as Doc[]).filter((p) => p.type !== 'row');
  const dashboardExprs = panels.flatMap((p) => (p.targets as Doc[]).map((t) => t.expr as string));
  const rules = (
    parse(read('deploy/prometheus/planfence-alerts.yaml')) as { groups: Doc[] }
  ).groups.flatMap((g) => g.rules as Rule[]);
  const ruleNames = (alert: string) =>
    metricNames(rules.find((r) => r.alert === alert)?.expr ?? '');

  let app: TestApp;
  let served: Set<string>;

  beforeAll(async () => {
    app = await startApp();
    const text = await (await fetch(`${app.url}/metrics`)).text();
    served = new Set();
    // Every metric the service registers has a TYPE line, observed yet or not.
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      served.add(name);
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) served.add(name + s);
      if (type === 'summary') for (const s of ['_sum', '_count']) served.add(name + s);
    }
  });
  afterAll(() => app.close());

  test('reading metric names out of PromQL', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, action) (rate(planfence_decision_duration_seconds_bucket{action=~"SUBMIT_PLAN|APPROVE_PLAN"}[$__rate_interval])))',
      ),
    ).toEqual(['planfence_decision_duration_seconds_bucket']);
    expect(
      metricNames(
        'max(a_pending) > 100 and deriv(max(a_pending)[30m:1m]) > 0 or sum(x{code="and"}) by (code) offset 5m',
      ),
    ).toEqual(['a_pending', 'a_pending', 'x']);
  });

  test('every metric the dashboard and the alert rules read is served on /metrics', () => {
    const exprs = [...dashboardExprs, ...rules.map((r) => r.expr)];
    const read = [...new Set(exprs.flatMap(metricNames))].sort();
    expect(read.length).toBeGreaterThan(15);
    const unknown = read.filter((name) => !served.has(name) && !(name in EXTERNAL));
    expect(unknown).toEqual([]);
    expect(read.filter((name) => name in EXTERNAL)).toEqual(Object.keys(EXTERNAL).sort());
  });

  test('the dashboard shows decisions and refusals, publish latency, lease queues, deployments, webhooks, policies and memory', () => {
    const shown = new Set(dashboardExprs.flatMap(metricNames));
    for (const name of [
      'planfence_decisions_total',
      'planfence_decision_duration_seconds_bucket',
      'planfence_lease_queue_length',
      'planfence_lease_queue_wait_seconds',
      'planfence_deployments_active',
      'planfence_deployments_unknown',
      'planfence_deployments_total',
      'planfence_webhook_deliveries_pending',
      'planfence_outbox_lag_seconds',
      'planfence_policy_evaluations_total',
      'planfence_process_resident_memory_bytes',
    ])
      expect({ name, shown: shown.has(name) }).toEqual({ name, shown: true });
    expect(
      dashboardExprs.some((e) => e.includes('outcome="REJECTED"') && e.includes('by (code)')),
    ).toBe(true);
    // Every panel reads the dashboard's data source variable; ids are unique.
    for (const panel of panels)
      expect(panel.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
  });

  test('alerts: webhook backlog, a deployment UNKNOWN for an hour, policy failures, storage unavailable, a lease queue head waiting', () => {
    for (const rule of rules) {
      expect(rule.alert).toMatch(/^Planfence[A-Z]\w+$/);
      expect(['warning', 'critical']).toContain(rule.labels.severity);
      expect(rule.annotations.summary).toBeTruthy();
      expect(rule.annotations.description).toBeTruthy();
    }
    expect(ruleNames('PlanfenceWebhookBacklog')).toEqual(['planfence_outbox_lag_seconds']);
    expect(ruleNames('PlanfenceWebhookBacklogGrowing')).toContain(
      'planfence_webhook_deliveries_pending',
    );
    expect(ruleNames('PlanfenceDeploymentUnknown')).toEqual(['planfence_deployments_unknown']);
    expect(rules.find((r) => r.alert === 'PlanfenceDeploymentUnknown')!.for).toBe('60m');
    expect(ruleNames('PlanfencePolicyFailures')).toEqual(['planfence_policy_evaluations_total']);
    expect(ruleNames('PlanfenceStorageUnavailable')).toEqual(['probe_success']);
    expect(ruleNames('PlanfenceLeaseQueueStuck')).toEqual(['planfence_lease_queue_wait_seconds']);
  });
});
