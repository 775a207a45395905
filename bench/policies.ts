/**
 * What plan policies cost (npm run bench:policies): CPU per request of the whole process
 * (request thread and policy worker together, getrusage) for a 1 MiB plan with 0 and with
 * 10 policies, one request at a time, on SQLite in memory. Two paths: a submit of a 1 MiB
 * TEXT plan, and dryRunPlanPolicies of a 1 MiB Terraform plan (the document is parsed and
 * sent to the worker only where a policy reads it). The client runs in the same process,
 * so each row includes its cost too; the difference between 0 and 10 is the policies'.
 */
import { pino } from 'pino';
import { createApp } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import { POLICIES } from './policy-set.js';

const TOKEN = 'pf_admin_token_for_bench_0123456789';
const REQUESTS = Number(process.env.BENCH_POLICY_REQUESTS ?? 40);

function terraformPlan(bytes: number): string {
  const changes = [];
  let size = 0;
  for (let i = 0; size < bytes - 400; i++) {
    const change = {
      address: `aws_instance.web[${i}]`,
      mode: 'managed',
      type: i % 50 === 0 ? 'aws_db_instance' : 'aws_instance',
      name: 'web',
      index: i,
      change: {
        actions: i % 7 === 0 ? ['delete', 'create'] : ['update'],
        before: { ami: 'ami-0123456789', instance_type: 't3.small', tags: { n: String(i) } },
        after: { ami: 'ami-0abcdef012', instance_type: 't3.medium', tags: { n: String(i) } },
      },
    };
    size += JSON.stringify(change).length + 1;
    changes.push(change);
  }
  return JSON.stringify({
    format_version: '1.2',
    terraform_version: '1.9.5',
    resource_changes: changes,
  });
}

async function main(): Promise<void> {
  const config = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    PLANFENCE_ADMIN_TOKEN: TOKEN,
    PLANFENCE_ADMIN_TOKEN_FILE: '/dev/null',
    PLANFENCE_MAX_PLAN_BYTES: String(1024 * 1024 + 1024),
    PLANFENCE_RATE_WRITES_PER_SECOND: '100000',
    PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR: String(1024 ** 4),
  });
  const app = await createApp(config, { logger: pino({ level: 'error' }) });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const gql = async (query: string, variables: Record<string, unknown>) => {
    const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { errors?: unknown[]; data: Record<string, unknown> };
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  };
  const text = 'x'.repeat(1024 * 1024);
  const document = terraformPlan(1024 * 1024);
  const rows: string[] = [];
  try {
    for (const count of [0, 10]) {
      const env = `bench-${count}`;
      await gql(
        'mutation($n: String!) { createEnvironment(input: { name: $n, requireApproval: false }) { name } }',
        { n: env },
      );
      await gql(
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
        { input: { environment: env, planPolicies: POLICIES.slice(0, count) } },
      );
      const { acquireLease } = (await gql(
        'mutation($n: String!) { acquireLease(input: { environment: $n, ttlSeconds: 3600 }) { generation } }',
        { n: env },
      )) as { acquireLease: { generation: number } };
      const measure = async (label: string, request: (i: number) => Promise<unknown>) => {
        for (let i = 0; i < 3; i++) await request(-1 - i); // warm up
        const cpu = process.cpuUsage();
        const started = performance.now();
        for (let i = 0; i < REQUESTS; i++) await request(i);
        const used = process.cpuUsage(cpu);
        const wall = performance.now() - started;
        rows.push(
          `| ${label} | ${count} | ${((used.user + used.system) / 1000 / REQUESTS).toFixed(1)} | ${(wall / REQUESTS).toFixed(1)} |`,
        );
      };
      await measure('submitPlan, 1 MiB TEXT', (i) =>
        gql('mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }', {
          input: {
            environment: env,
            generation: acquireLease.generation,
            idempotencyKey: `${env}-${i}`,
            content: text.slice(0, text.length - 8) + String(i).padStart(8, '0'),
            title: 'bench',
          },
        }),
      );
      await measure('dryRunPlanPolicies, 1 MiB Terraform', async () => {
        const data = (await gql(
          'query($e: String!, $c: String!) { dryRunPlanPolicies(environment: $e, content: $c, contentType: TERRAFORM_PLAN_JSON) { policy error } }',
          { e: env, c: document },
        )) as { dryRunPlanPolicies: { policy: string; error: string | null }[] };
        const failed = data.dryRunPlanPolicies.filter((r) => r.error);
        // A policy that ran out of budget would deny: the row would measure a refusal.
        if (failed.length) throw new Error(`policies failed: ${JSON.stringify(failed)}`);
      });
    }
  } finally {
    await app.close();
  }
  console.log(
    `${REQUESTS} requests each, one at a time; CPU of the whole process (service, policy worker, client)\n`,
  );
  console.log('| request | policies | CPU ms / request | wall ms / request |');
  console.log('|---|---|---|---|');
  for (const row of rows.sort()) console.log(row);
}

await main();
