/**
 * The crash harness. Agents submit plans with idempotency keys while the service
 * (a child process on a SQLite file, synchronous=FULL) is killed with SIGKILL at a
 * random moment; it is restarted on the same file and the agents retry every
 * submission they did not see acknowledged, with the same key and input. Checks:
 *   - every acknowledged submission is there after the restart, whole;
 *   - no retry made a second plan (one plan per key);
 *   - lastIssuedGeneration never decreased and no generation was granted twice;
 *   - the pointer did not move back.
 *
 *   npm run test:crash -- --kills 10 --seed 7
 *   npm run test:crash -- --kills 6 --postgres postgres://user:pw@127.0.0.1/postgres --instances 2
 */
import { pathToFileURL } from 'node:url';
import { ADMIN_TOKEN, deploy, option, seededRandom, textOption } from './service.js';

export interface CrashReport {
  kills: number;
  acknowledged: number;
  retried: number;
  lost: number;
  duplicates: number;
  violations: string[];
  seed: number;
}

interface Submission {
  environment: string;
  generation: number;
  key: string;
  content: string;
  planId?: string;
}

const SUBMIT = 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }';

export async function runCrashHarness(options: {
  kills: number;
  seed: number;
  agents: number;
  /** A PostgreSQL server to run on instead of a SQLite file. */
  postgres?: string | null;
  /** Instances sharing the database; each kill takes down one, the others keep serving. */
  instances?: number;
}): Promise<CrashReport> {
  const random = seededRandom(options.seed);
  const deployment = await deploy(options, 'crash');
  const { instances } = deployment;
  let service = instances[0];
  const violations: string[] = [];
  const acknowledged: Submission[] = [];
  const granted = new Map<string, number[]>();
  const lastIssued = new Map<string, number>();
  let retried = 0;
  try {
    const agents: { token: string; environment: string; instance: number }[] = [];
    for (let i = 0; i < options.agents; i++) {
      const token = await service.issueToken(`agent-${i}`, 'AGENT');
      const environment = `crash-${i}`;
      await service.ok(
        ADMIN_TOKEN,
        `mutation { createEnvironment(input: { name: "${environment}", requireApproval: false }) { name } }`,
      );
      agents.push({ token, environment, instance: i % instances.length });
      granted.set(environment, []);
    }

    // A kill counts only if it cut at least one submission short (one the agent saw no
    // answer to, and retries): a kill that fell between requests is made again, a bounded
    // number of times, so a run proves what it reports instead of hoping for it.
    let attempts = 0;
    for (let kill = 1; kill <= options.kills; kill++) {
      if (++attempts > options.kills * 10) {
        violations.push(`${attempts - 1} kills cut only ${kill - 1} submissions short`);
        break;
      }
      let crashed = false;
      const pending: { token: string; submission: Submission }[] = [];
      /** Submissions sent and not yet answered, per instance. */
      const inFlight = instances.map(() => 0);

      /** An agent: a new lease, then plans as fast as it can, until the service goes away. */
      const work = async ({ token, environment, instance }: (typeof agents)[number]) => {
        const service = instances[instance];
        let generation: number;
        try {
          const lease = await service.gql(
            token,
            `mutation { acquireLease(input: { environment: "${environment}", ttlSeconds: 3600 }) { generation } }`,
          );
          if (lease.errors) throw new Error(JSON.stringify(lease.errors));
          generation = lease.data.acquireLease.generation as number;
          granted.get(environment)!.push(generation);
        } catch (error) {
          if (!crashed)
            violations.push(`${environment}: acquire failed before the crash: ${String(error)}`);
          return;
        }
        for (let i = 0; !crashed; i++) {
          const key = `${environment}-k${kill}-${i}`;
          const submission: Submission = { environment, generation, key, content: `plan ${key}` };
          inFlight[instance]++;
          try {
            const result = await service.gql(token, SUBMIT, {
              input: { environment, generation, idempotencyKey: key, content: submission.content },
            });
            if (result.errors) throw new Error(JSON.stringify(result.errors));
            acknowledged.push({ ...submission, planId: result.data.submitPlan.id });
          } catch {
            pending.push({ token, submission }); // no acknowledgement: the agent will retry it
            return;
          } finally {
            inFlight[instance]--;
          }
        }
      };
      let settled = false;
      const working = Promise.all(agents.map(work)).finally(() => {
        settled = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 150 + random(450)));
      const target = instances[(kill - 1) % instances.length];
      const targetIndex = instances.indexOf(target);
      // SIGKILL only while a submission to the target is in flight (sent before crash()
      // first waits), then the agents stop.
      while (inFlight[targetIndex] === 0 && !settled)
        await new Promise((resolve) => setImmediate(resolve));
      const dying = target.crash();
      crashed = true;
      await dying;
      await working;
      // With several instances, the others serve the checks and the retries while the killed one is down.
      service = instances.find((instance) => instance !== target) ?? target;
      if (service === target) await target.start();

      for (const { environment } of agents) {
        const issued = (
          await service.ok(
            ADMIN_TOKEN,
            `{ environment(name: "${environment}") { lastIssuedGeneration } }`,
          )
        ).environment.lastIssuedGeneration as number;
        const before = lastIssued.get(environment) ?? 0;
        const highestAcknowledged = Math.max(0, ...granted.get(environment)!);
        if (issued < before || issued < highestAcknowledged) {
          violations.push(
            `${environment}: lastIssuedGeneration ${issued} after restart ${kill}, had ${before}, acknowledged ${highestAcknowledged}`,
          );
        }
        lastIssued.set(environment, issued);
      }
      // Retries: same key, same input. Either the first attempt committed (replayed) or this one does.
      for (const { token, submission } of pending) {
        retried++;
        const { environment, generation, key, content } = submission;
        const result = await service.gql(token, SUBMIT, {
          input: { environment, generation, idempotencyKey: key, content },
        });
        if (result.errors)
          violations.push(`${key}: retry failed with ${JSON.stringify(result.errors)}`);
        else acknowledged.push({ ...submission, planId: result.data.submitPlan.id });
      }
      // A few acknowledged submissions retried again must replay the same plan.
      for (let i = 0; i < 5 && acknowledged.length; i++) {
        const earlier = acknowledged[random(acknowledged.length)];
        const token = agents.find((a) => a.environment === earlier.environment)!.token;
        const replay = await service.gql(token, SUBMIT, {
          input: {
            environment: earlier.environment,
            generation: earlier.generation,
            idempotencyKey: earlier.key,
            content: earlier.content,
          },
        });
        if (replay.data?.submitPlan.id !== earlier.planId)
          violations.push(
            `${earlier.key}: replay gave ${JSON.stringify(replay)} instead of ${earlier.planId}`,
          );
      }
      if (service !== target) await target.start();
      if (pending.length === 0) kill--;
    }

    let lost = 0;
    let duplicates = 0;
    for (const { environment } of agents) {
      const plans = await service.ok<{
        plans: { id: string; content: string }[];
        environment: { currentPlan: { id: string } | null };
      }>(
        ADMIN_TOKEN,
        `{ plans(environment: "${environment}", first: 500) { id content } environment(name: "${environment}") { currentPlan { id } } }`,
      );
      const all: { id: string; content: string }[] = [...plans.plans];
      // plans() pages by 500: walk on for long runs.
      while (all.length % 500 === 0 && all.length > 0) {
        const page = (
          await service.ok(
            ADMIN_TOKEN,
            'query($e: String!, $after: ID) { plans(environment: $e, first: 500, after: $after) { id content } }',
            { e: environment, after: all[all.length - 1].id },
          )
        ).plans as { id: string; content: string }[];
        if (!page.length) break;
        all.push(...page);
      }
      const byContent = new Map<string, number>();
      for (const plan of all) byContent.set(plan.content, (byContent.get(plan.content) ?? 0) + 1);
      duplicates += [...byContent.values()].filter((n) => n > 1).length;
      const stored = new Map(all.map((p) => [p.id, p.content]));
      for (const ack of acknowledged.filter((a) => a.environment === environment)) {
        if (stored.get(ack.planId!) !== ack.content) {
          lost++;
          violations.push(`${ack.key}: acknowledged as ${ack.planId} but not stored whole`);
        }
      }
      const generations = granted.get(environment)!;
      if (new Set(generations).size !== generations.length)
        violations.push(`${environment}: a generation was granted twice: ${generations.join(',')}`);
      const newest = all[0]?.id ?? null;
      if ((plans.environment.currentPlan?.id ?? null) !== newest)
        violations.push(
          `${environment}: pointer is ${plans.environment.currentPlan?.id}, newest plan is ${newest}`,
        );
    }
    return {
      kills: options.kills,
      acknowledged: acknowledged.length,
      retried,
      lost,
      duplicates,
      violations,
      seed: options.seed,
    };
  } finally {
    await deployment.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  const report = await runCrashHarness({
    kills: option(argv, 'kills', 5),
    seed: option(argv, 'seed', Date.now() % 1_000_000),
    agents: option(argv, 'agents', 4),
    postgres: textOption(argv, 'postgres'),
    instances: option(argv, 'instances', 1),
  });
  for (const violation of report.violations) console.error(violation);
  console.log(
    `kills=${report.kills} acknowledged=${report.acknowledged} retried=${report.retried} lost=${report.lost} duplicates=${report.duplicates} violations=${report.violations.length} seed=${report.seed}`,
  );
  process.exitCode = report.violations.length ? 1 : 0;
}
