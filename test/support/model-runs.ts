import { TEST_DATABASE } from './app.js';

/**
 * How many runs the model tests make, and from which seed.
 *
 * `npm test` replays one fixed seed: the command sequences are the same on every run, so
 * the gate passes or fails by the code alone, and every outcome the test requires is known
 * to be reached. To explore new sequences: `FC_SEED=random FC_RUNS=2000 npm test -- model`
 * (a failure prints its seed and path; FC_SEED and FC_PATH replay it).
 */
export const MODEL_RUNS = Number(process.env.FC_RUNS ?? 100);

/** The seed `npm test` replays unless FC_SEED says otherwise. */
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

/**
 * A model test whose commands cost two to four times as much on PostgreSQL: there `npm test`
 * replays fewer runs of another seed, `postgres`, chosen because those runs reach every
 * outcome the test requires, as the SQLite project's 100 runs of FIXED_SEED do (the test
 * checks it). Between the two projects, more different sequences than either alone. FC_RUNS
 * or FC_SEED choose for both projects; FC_REACH=1 checks the outcomes reached whatever the
 * number of runs (how a new PostgreSQL seed is found).
 */
export function modelRuns(postgres: { runs: number; seed: number }): ModelRuns {
  const chosen = process.env.FC_RUNS !== undefined || process.env.FC_SEED !== undefined;
  const checked = process.env.FC_REACH === '1';
  if (chosen || TEST_DATABASE === 'sqlite')
    return {
      runs: MODEL_RUNS,
      seed: MODEL_SEED,
      reachesEveryOutcome: MODEL_RUNS >= 100 || checked,
    };
  return { ...postgres, reachesEveryOutcome: true };
}

/** The service's model test (test/model.test.ts). */
export const SERVICE_MODEL = modelRuns({ runs: 50, seed: 4 });
