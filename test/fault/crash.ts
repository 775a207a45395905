/**
 * The crash harness. Agents submit plans with idempotency keys while the service
 * (a child process on a SQLite file, synchronous=FULL) is killed with SIGKILL at a
 * random moment; it is restarted on the same file and the agents retry every
 * submission they did not see acknowledged, with the same key and input. Checks:
 *   - every acknowledged submission is there after the restart, whole;
 *   - no retry made a second plan (one plan per key);
 *   - lastIssuedGeneration never decreased and no generation was granted twice;
 *   - the pointer did not move back.
 * Meanwhile queue agents wait in one environment's lease queue (R37–R39): enqueue, wait
 * for the grant, release, again; the kill finds tickets waiting and grants in flight.
 * After each restart the tickets left are drained in order, and at the end every ticket
 * of that environment is read: no generation granted twice, no ticket granted twice,
 * grants in queue order, none left waiting.
 *
 *   npm run test:crash -- --kills 10 --seed 7
 *   npm run test:crash -- --kills 10 --plan-kib 256   (large plans: kills mid-checkpoint)
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
  /** Lease tickets granted in the queue environment, and those the harness saw granted. */
  queue: { granted: number; seen: number };
  /**
   * SQLite: the submits the last service process handed to its writer thread (its retries
   * of the submissions the last kill cut short among them); null on PostgreSQL.
   */
  onThread: number | null;
}

const QUEUE_ENV = 'crash-queue';
const TICKET = 'id environment status lease { generation }';
interface Ticket {
  id: string;
  environment: string;
  status: string;
  lease: { generation: number } | null;
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
  /**
   * Each plan's content padded to this many KiB (default 0): on SQLite the WAL then fills
   * fast enough for the kills to find the checkpoint thread copying pages back.
   */
  planKib?: number;
}): Promise<CrashReport> {
  const random = seededRandom(options.seed);
  const padding = 'x'.repeat((options.planKib ?? 0) * 1024);
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
    await service.ok(
      ADMIN_TOKEN,
      `mutation { createEnvironment(input: { name: "${QUEUE_ENV}", mode: STRICT }) { name } }`,
    );
    const waiters: { token: string; instance: number }[] = [];
    for (let i = 0; i < 3; i++) {
      waiters.push({
        token: await service.issueToken(`waiter-${i}`, 'AGENT'),
        instance: i % instances.length,
      });
    }
    /** Tickets whose enqueue was acknowledged, and the generation each was seen granted. */
    const tickets = new Map<string, number | null>();
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    /** Reads a ticket until it no longer waits (a ticket waits for 2 s leases, never this long). */
    const decided = async (service: (typeof instances)[number], id: string): Promise<Ticket> => {
      const deadline = Date.now() + 90_000;
      for (;;) {
        if (Date.now() > deadline) throw new Error(`ticket ${id} still waits after 90 s`);
        const ticket = (
          await service.ok<{ leaseTicket: Ticket }>(
            ADMIN_TOKEN,
            `query($id: ID!) { leaseTicket(id: $id) { ${TICKET} } }`,
            { id },
          )
        ).leaseTicket;
        if (ticket.status !== 'WAITING') return ticket;
        await sleep(25);
      }
    };
    const releaseGrant = async (
      service: (typeof instances)[number],
      token: string,
      ticket: Ticket,
    ) => {
      if (ticket.status !== 'GRANTED') return;
      tickets.set(ticket.id, ticket.lease!.generation);
      await service.gql(
        token,
        'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
        { e: QUEUE_ENV, g: ticket.lease!.generation },
      );
    };

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
      const target = instances[(kill - 1) % instances.length];
      const targetIndex = instances.indexOf(target);
      /** Submissions sent and not yet answered, per instance. */
      const inFlight = instances.map(() => 0);
      /** Called when a submission to the target is sent (or every agent and waiter ended). */
      let submitted = (): void => undefined;
      /** What each agent does now, for a report when a kill finds nothing in flight. */
      const doing = new Map<string, string>();

      /** An agent: a new lease, then plans as fast as it can, until the service goes away. */
      const work = async ({ token, environment, instance }: (typeof agents)[number]) => {
        const service = instances[instance];
        let generation: number;
        try {
          doing.set(environment, 'acquiring');
          const lease = await service.gql(
            token,
            `mutation { acquireLease(input: { environment: "${environment}", ttlSeconds: 3600 }) { generation } }`,
          );
          if (lease.errors) throw new Error(JSON.stringify(lease.errors));
          generation = lease.data.acquireLease.generation as number;
          granted.get(environment)!.push(generation);
        } catch (error) {
          doing.set(environment, `acquire failed: ${String(error)}`);
          if (!crashed)
            violations.push(`${environment}: acquire failed before the crash: ${String(error)}`);
          return;
        }
        for (let i = 0; !crashed; i++) {
          // Unique per attempt: a kill that cut nothing short is made again with new leases.
          const key = `${environment}-a${attempts}-${i}`;
          doing.set(environment, `submitting ${key}`);
          const submission: Submission = {
            environment,
            generation,
            key,
            content: `plan ${key}\n${padding}`,
          };
          inFlight[instance]++;
          if (instance === targetIndex) submitted();
          try {
            const result = await service.gql(token, SUBMIT, {
              input: { environment, generation, idempotencyKey: key, content: submission.content },
            });
            if (result.errors) throw new Error(JSON.stringify(result.errors));
            acknowledged.push({ ...submission, planId: result.data.submitPlan.id });
          } catch (error) {
            pending.push({ token, submission }); // no acknowledgement: the agent will retry it
            doing.set(environment, `stopped at ${key}: ${String(error).slice(0, 300)}`);
            return;
          } finally {
            inFlight[instance]--;
          }
        }
        doing.set(environment, 'stopped: the service went away');
      };
      /** Tickets of this round not seen decided before the crash: drained after the restart. */
      const undecided: { token: string; id: string }[] = [];
      /** A queue agent: enqueue, wait for the grant, release; until the service goes away. */
      const wait = async ({ token, instance }: (typeof waiters)[number]) => {
        const service = instances[instance];
        while (!crashed) {
          let id: string | null = null;
          try {
            const enqueued = await service.gql<{ enqueueLease: Ticket }>(
              token,
              `mutation { enqueueLease(input: { environment: "${QUEUE_ENV}", ttlSeconds: 2, maxWaitSeconds: 120 }) { ${TICKET} } }`,
            );
            if (enqueued.errors) throw new Error(JSON.stringify(enqueued.errors));
            id = enqueued.data!.enqueueLease.id;
            tickets.set(id, null);
            await releaseGrant(service, token, await decided(service, id));
          } catch {
            if (id) undecided.push({ token, id });
            return;
          }
        }
      };
      let settled = false;
      const working = Promise.all([...agents.map(work), ...waiters.map(wait)]).finally(() => {
        settled = true;
        submitted();
      });
      await new Promise((resolve) => setTimeout(resolve, 150 + random(450)));
      // SIGKILL only while a submission to the target is in flight (sent before crash()
      // first waits), then the agents stop. Waiting is event-driven: nothing spins.
      if (inFlight[targetIndex] === 0 && !settled) {
        let timer: NodeJS.Timeout | undefined;
        const sent = await Promise.race([
          new Promise<true>((resolve) => (submitted = () => resolve(true))),
          new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 30_000))),
        ]);
        clearTimeout(timer);
        submitted = () => undefined;
        if (!sent)
          violations.push(
            `kill ${kill}: no submission to instance ${targetIndex} in 30 s; agents: ${JSON.stringify(Object.fromEntries(doing))}`,
          );
        // The request leaves on the next turn of the event loop.
        else await new Promise((resolve) => setImmediate(resolve));
      }
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
      // The queue goes on where it stopped: every ticket left is granted in turn (or expires).
      for (const { token, id } of undecided) {
        try {
          await releaseGrant(service, token, await decided(service, id));
        } catch (error) {
          violations.push(`${QUEUE_ENV}: after restart ${kill}: ${String(error)}`);
        }
      }
      if (service !== target) await target.start();
      process.stderr.write(
        `crash harness: kill ${kill}/${options.kills} (attempt ${attempts}): ${pending.length} cut short, ${acknowledged.length} acknowledged, ${undecided.length} tickets undecided\n`,
      );
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
    // Tickets whose enqueue committed but was not answered are granted in turn and run out.
    for (let i = 0; i < 400; i++) {
      const waiting = (
        await service.ok<{ leaseQueue: unknown[] }>(
          ADMIN_TOKEN,
          `{ leaseQueue(environment: "${QUEUE_ENV}") { id } }`,
        )
      ).leaseQueue.length;
      if (!waiting) break;
      await sleep(100);
    }
    // Every ticket of the queue environment, known to the harness or not (an enqueue cut short,
    // possibly the run's first: ids are counted from the first ticket of the database).
    const known = [...tickets.keys()].map(Number);
    const all: Ticket[] = [];
    for (let id = 1; id <= Math.max(...known) + 5; id++) {
      const ticket = (
        await service.ok<{ leaseTicket: Ticket | null }>(
          ADMIN_TOKEN,
          `query($id: ID!) { leaseTicket(id: $id) { ${TICKET} } }`,
          { id: String(id) },
        )
      ).leaseTicket;
      if (ticket?.environment === QUEUE_ENV) all.push(ticket);
    }
    const grants = all.filter((t) => t.status === 'GRANTED');
    const generations = grants.map((t) => t.lease!.generation);
    if (new Set(generations).size !== generations.length)
      violations.push(`${QUEUE_ENV}: a generation was granted twice: ${generations.join(',')}`);
    if (generations.some((g, i) => i > 0 && g <= generations[i - 1]))
      violations.push(
        `${QUEUE_ENV}: tickets were not granted in queue order: ${generations.join(',')}`,
      );
    for (const [id, seen] of tickets) {
      const now = all.find((t) => t.id === id);
      if (seen != null && now?.lease?.generation !== seen)
        violations.push(
          `${QUEUE_ENV}: ticket ${id} was granted ${seen}, now reads ${JSON.stringify(now)}`,
        );
    }
    const lastIssuedQueue = (
      await service.ok(
        ADMIN_TOKEN,
        `{ environment(name: "${QUEUE_ENV}") { lastIssuedGeneration } }`,
      )
    ).environment.lastIssuedGeneration as number;
    if (lastIssuedQueue !== grants.length)
      violations.push(
        `${QUEUE_ENV}: ${lastIssuedQueue} generations issued for ${grants.length} grants`,
      );
    const stillWaiting = all.filter((t) => t.status === 'WAITING').length;
    if (stillWaiting)
      violations.push(
        `${QUEUE_ENV}: ${stillWaiting} tickets still wait after the queue was drained`,
      );
    // SQLite: the submits (the retries among them) went through the writer thread.
    let onThread: number | null = null;
    if (!options.postgres) {
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      onThread = Number(/^planfence_writer_thread_writes_total (\d+)$/m.exec(metrics)?.[1] ?? 0);
      if (onThread === 0) violations.push('the writer thread decided no submit');
    }
    return {
      onThread,
      queue: {
        granted: grants.length,
        seen: [...tickets.values()].filter((g) => g != null).length,
      },
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
    planKib: option(argv, 'plan-kib', 0),
  });
  for (const violation of report.violations) console.error(violation);
  console.log(
    `kills=${report.kills} acknowledged=${report.acknowledged} retried=${report.retried} lost=${report.lost} duplicates=${report.duplicates} violations=${report.violations.length} queue=${JSON.stringify(report.queue)} onThread=${report.onThread} seed=${report.seed}`,
  );
  process.exitCode = report.violations.length ? 1 : 0;
}
