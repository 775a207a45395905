import { appendFileSync, readFileSync } from 'node:fs';
import { TestEnvironment } from 'jest-environment-node';
import { mutationTestIndex } from './mutation-sequencer.js';
import { needsBuild, staleSource } from './build-freshness.js';
import { nativeService } from './native.js';

/** How long closing what a test file left open may take before the run moves on. */
const CLOSE_GRACE_MS = 30_000;

/**
 * jest's node environment, which closes whatever apps a test file left open once the file's
 * own hooks have run (an `afterAll` in a setup file would run before them, and close an app
 * while the file's receivers still hold its requests). test/support/app.ts registers the
 * closer on the file's global. An app whose close hangs is reported and left to its worker.
 * With PLANFENCE_TEST_LEAKS=1, it also names the handles a file left open (sockets, servers,
 * child processes, timers that keep a process alive): what keeps a worker from exiting.
 */
export default class PlanfenceEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
    this.inRealm = Boolean(config.projectConfig.globals?.__planfenceInRealm);
    // Mutation testing's first run, with no mutant active: which file holds each test.
    this.testIndex =
      this.inRealm && !process.env.__STRYKER_ACTIVE_MUTANT__
        ? mutationTestIndex(config.projectConfig.rootDir)
        : null;
  }

  async handleTestEvent(event, state) {
    if (this.testIndex && event.name === 'test_start')
      appendFileSync(
        this.testIndex,
        `${JSON.stringify({ name: fullName(event.test), file: this.testPath })}\n`,
      );
    // A mutant's run stops at its first failing test (Stryker counts the mutant killed by
    // it, and jest's own bail is not available to Stryker): the tests after it, in this file
    // and the next, are skipped, and a file with none left runs no hooks.
    // A beforeAll that fails does not count here: jest gives its error to each test of its
    // block as that test runs, and a test skipped here would hide it (a mutant reached only
    // from beforeAll hooks, which Stryker runs with every test, would seem to survive).
    const mutant = this.inRealm ? process.env.__STRYKER_ACTIVE_MUTANT__ : undefined;
    if (!mutant) return;
    if (
      (event.name === 'test_done' && event.test.errors.length) ||
      (event.name === 'hook_failure' && event.hook.type !== 'beforeAll')
    )
      killedMutants.add(mutant);
    else if (killedMutants.has(mutant)) {
      if (event.name === 'run_start') skipAll(state.rootDescribeBlock);
      else if (event.name === 'test_start') event.test.mode = 'skip';
    }
  }

  async setup() {
    await super.setup();
    // Under mutation testing, the suites run in a copy of the repository whose files' times
    // say nothing of which is newer (the mutation scripts build first).
    if (needsBuild(this.testPath) && !this.inRealm) {
      const stale = staleSource();
      if (stale)
        throw new Error(
          `this suite runs code from dist/, which is older than ${stale}: run \`npm run build\` (npm test builds first)`,
        );
    }
    // A file that does not look inside the running service starts its apps from the
    // worker's one load of dist/.
    if (!this.inRealm && !process.env.PLANFENCE_TEST_IN_REALM && !reachesInside(this.testPath)) {
      if (staleSource() === null) this.global.__planfenceService = await nativeService();
    }
    this.startedAt = Date.now();
    this.resourcesBefore = activeResources();
    this.cpuAtStart = process.env.PLANFENCE_TEST_CPU ? cpuNow() : null;
  }

  async teardown() {
    const close = this.global.__planfenceCloseOpenApps;
    if (typeof close === 'function') {
      let timer;
      await Promise.race([
        close().catch((error) =>
          console.warn(`closing the apps a test left open failed: ${String(error)}`),
        ),
        new Promise((resolve) => {
          timer = setTimeout(() => {
            console.warn(`apps a test left open did not close within ${CLOSE_GRACE_MS / 1000} s`);
            resolve();
          }, CLOSE_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    if (this.testIndex)
      appendFileSync(
        this.testIndex,
        `${JSON.stringify({ file: this.testPath, seconds: (Date.now() - this.startedAt) / 1000 })}\n`,
      );
    // Read before jest's teardown, which deletes what the file left on its global object.
    const database = this.global.__DATABASE__;
    const appStats = this.global.__planfenceAppStats;
    const starts = appStats && { starts: appStats.starts, startMs: appStats.startMs };
    await super.teardown();
    if (this.cpuAtStart) recordCpu(this.testPath, database, this.cpuAtStart, starts);
    if (!process.env.PLANFENCE_TEST_LEAKS) return;
    // What the file left running keeps its worker from exiting at the end of the run.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const left = [];
    for (const [kind, count] of activeResources())
      if (count > (this.resourcesBefore.get(kind) ?? 0))
        left.push(`${kind}×${count - (this.resourcesBefore.get(kind) ?? 0)}`);
    if (left.length)
      process.stderr.write(
        `LEAK ${this.testPath}: still open after teardown: ${left.join(', ')}\n`,
      );
  }
}

/** The mutants a test failed for, in this process (each test file's environment sees them). */
const killedMutants = (process[Symbol.for('planfence.killedMutants')] ??= new Set());

/** Marks every test under `block` skipped. */
function skipAll(block) {
  for (const child of block.children)
    if (child.type === 'describeBlock') skipAll(child);
    else child.mode = 'skip';
}

/**
 * A test's full name as jest's results and Stryker's test ids give it: its describe blocks'
 * names and its own, joined by spaces.
 */
function fullName(test) {
  const names = [test.name];
  for (let block = test.parent; block?.parent; block = block.parent) names.unshift(block.name);
  return names.join(' ');
}

/**
 * Whether the test file reaches into the running service itself through its Nest
 * application (`app.app.get(SomeClass)`), whose class must be the app's own, not a copy from
 * the file's registry. `TestApp.get(SomeClass)` finds the provider by its class's name
 * either way. (Importing the sources is fine otherwise: what a file builds from them, a
 * ManualClock or a client, works with a service loaded elsewhere.)
 */
function reachesInside(testPath) {
  return /\.app\s*\.\s*get\(/.test(readFileSync(testPath, 'utf8'));
}

/** The kinds of the process's active handles and requests, counted. */
function activeResources() {
  const counts = new Map();
  for (const kind of process.getActiveResourcesInfo())
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/**
 * Seconds of wall time, of this worker's CPU (the file's tests and the services they run in
 * the worker) and of the CPU of the child processes it reaped (services, command lines,
 * terraform started by the file): the sum of utime and stime, and of cutime and cstime, in
 * /proc/self/stat (Linux; clock ticks of 1/100 s).
 */
function cpuNow() {
  const usage = process.cpuUsage();
  let children = NaN;
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    children = (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    // Not Linux: the children's CPU is not known.
  }
  return { wall: Date.now() / 1000, self: (usage.user + usage.system) / 1e6, children };
}

/**
 * PLANFENCE_TEST_CPU=FILE: one tab-separated line per test file appended to FILE (file,
 * database, wall s, worker CPU s, children CPU s, apps started in the worker, wall s those
 * starts took), what a test file costs the machine.
 */
function recordCpu(testPath, database, start, apps) {
  const end = cpuNow();
  const line = [
    testPath.replace(/.*\/test\//, ''),
    database ?? 'sqlite',
    ...['wall', 'self', 'children'].map((key) => (end[key] - start[key]).toFixed(1)),
    apps?.starts ?? 0,
    ((apps?.startMs ?? 0) / 1000).toFixed(1),
  ];
  appendFileSync(process.env.PLANFENCE_TEST_CPU, `${line.join('\t')}\n`);
}
