/**
 * The docs are true: every marked walkthrough runs as written (test/docs-walkthroughs.ts,
 * on the built service), and the facts the docs state are those of the code.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { distFile } from './fault/service.js';
import { walkthroughs } from './docs-walkthroughs.js';

const read = (path: string) => readFileSync(join(process.cwd(), path), 'utf8');

/** The walkthroughs need these on PATH; where one is missing the test is skipped. */
const TOOLS = ['bash', 'curl', 'jq', 'timeout'];
const missing = TOOLS.filter(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
);
const withTools = missing.length ? test.skip : test;

withTools(
  'every walkthrough of README.md and docs/ runs as written, each file on a fresh database',
  () => {
    expect(walkthroughs().map((w) => w.file)).toEqual(
      expect.arrayContaining([
        'README.md',
        'docs/policies.md',
        'docs/preconditions.md',
        'docs/runner.md',
        'docs/terraform.md',
      ]),
    );
    const run = spawnSync(process.execPath, [distFile('test/docs-walkthroughs.js')], {
      encoding: 'utf8',
      timeout: 20 * 60_000,
    });
    if (run.status !== 0) console.error(run.stdout, run.stderr);
    expect(run.stdout).toMatch(/walkthroughs=\d+ failed=0/);
    expect(run.status).toBe(0);
  },
  20 * 60_000,
);

test('README walkthrough waits for /health before it calls the service', () => {
  const [readme] = walkthroughs('README.md');
  const script = readme.blocks.join('\n');
  const started = script.indexOf('npm start &');
  const waited = script.indexOf('/health');
  const firstCall = script.indexOf('gql $');
  expect(started).toBeGreaterThanOrEqual(0);
  expect(waited).toBeGreaterThan(started);
  expect(firstCall).toBeGreaterThan(waited);
});

test('docs/security.md names every subscription the service serves', () => {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(process.cwd(), dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith('.ts'))
        for (const m of read(path).matchAll(
          /@Subscription\([\s\S]*?\)\s*\n\s*(?:async\s+)?(\w+)\(/g,
        ))
          names.add(m[1]);
    }
  };
  walk('src');
  expect([...names].sort()).toEqual(
    expect.arrayContaining(['activityRecorded', 'deploymentChanged', 'planPublished']),
  );
  const security = read('docs/security.md');
  for (const name of names) expect(security).toContain(`\`${name}\``);
});

test("docs/deployments.md states the heartbeat's range, as the input checks it", () => {
  const input = read('src/deployments/dto/deployment.input.ts');
  const min = /Min\((\d+), \{ message: '\$property must be \d+ to \d+' \}\)/.exec(input)?.[1];
  const max = /Max\((\d+), \{ message: '\$property must be \d+ to \d+' \}\)/.exec(input)?.[1];
  expect(min).toBeDefined();
  expect(max).toBeDefined();
  expect(read('docs/deployments.md')).toContain(`\`heartbeatSeconds\` is ${min} to ${max}`);
});

test('docs/operations.md explains what PLANFENCE_ADMIN_TOKEN does to the token of the file', () => {
  const operations = read('docs/operations.md');
  expect(operations).toContain('## The admin token');
  expect(operations).toContain('no longer works');
});
