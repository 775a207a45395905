import fc from 'fast-check';
import { TEST_DATABASE } from './app.js';

// Under mutation testing a failing run is not shrunk: that it fails is all the run needs.
if ((globalThis as { __planfenceInRealm?: boolean }).__planfenceInRealm)
  fc.configureGlobal({ ...fc.readConfigureGlobal(), endOnFailure: true });

/**
 * How many runs the model tests make, and from which seed.
 *
 * `npm test` replays fixed seeds (modelRuns below): the command sequences are the same on
 * every run. To explore new sequences: `FC_SEED=random FC_RUNS=2000 npm test -- model` (a
 * failure prints its seed and path; FC_SEED and FC_PATH replay it).
 */
export const MODEL_RUNS = Number(process.env.FC_RUNS ?? 100);

/** The seed of runs FC_RUNS asks for without FC_SEED. */
const FIXED_SEED = 20_261_201;

/** undefined: fast-check picks one (FC_SEED=random). */
export const MODEL_SEED: number | undefined =
  process.env.FC_SEED === 'random' ? undefined : Number(process.env.FC_SEED ?? FIXED_SEED);

/** How a model test runs: how many runs, from which seed, and whether it checks the outcomes reached. */
export interface ModelRuns {
  runs: number;
  seed: number | undefined;
  /** Enough runs to reach every outcome the test requires (it checks that they were). */
  reachesEveryOutcome: boolean;
}

/** The runs `npm test` replays on one database. */
export interface Replay {
  runs: number;
  seed: number;
}

/**
 * How a model test runs in this project. `npm test` replays, on each database, a few dozen
 * runs of a seed of its own, chosen because those runs reach every outcome the test
 * requires (the test checks that they do): the gate passes or fails by the code alone, and
 * between the two projects more different sequences run than either alone. FC_RUNS or
 * FC_SEED choose for both projects (then 100 runs or more are taken to reach every outcome);
 * FC_REACH=1 checks the outcomes reached whatever the number of runs (how a new seed is
 * found: `FC_REACH=1 FC_RUNS=40 FC_SEED=s`).
 */
export function modelRuns(replays: { sqlite: Replay; postgres: Replay }): ModelRuns {
  const chosen = process.env.FC_RUNS !== undefined || process.env.FC_SEED !== undefined;
  const checked = process.env.FC_REACH === '1';
  if (chosen)
    return {
      runs: MODEL_RUNS,
      seed: MODEL_SEED,
      reachesEveryOutcome: MODEL_RUNS >= 100 || checked,
    };
  return { ...replays[TEST_DATABASE], reachesEveryOutcome: true };
}

/** The service's model test (test/model.test.ts). */
export const SERVICE_MODEL = modelRuns({
  sqlite: { runs: 45, seed: 10 },
  postgres: { runs: 35, seed: 23 },
});
