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

/** The seed the PostgreSQL project replays: its first 50 runs reach every required outcome. */
const POSTGRES_SEED = 4;

/**
 * The service's model test (test/model.test.ts), whose commands cost two to three times as
 * much on PostgreSQL: there `npm test` replays 50 runs of another seed, whose 50 runs reach every
 * outcome the test requires, as the SQLite project's 100 runs of FIXED_SEED do. Between the
 * two projects, 150 different sequences.
 */
export const SERVICE_MODEL = ((): {
  runs: number;
  seed: number | undefined;
  /** Enough runs to reach every outcome the test requires (it checks that they were). */
  reachesEveryOutcome: boolean;
} => {
  const chosen = process.env.FC_RUNS !== undefined || process.env.FC_SEED !== undefined;
  if (chosen || TEST_DATABASE === 'sqlite')
    return { runs: MODEL_RUNS, seed: MODEL_SEED, reachesEveryOutcome: MODEL_RUNS >= 100 };
  return { runs: 50, seed: POSTGRES_SEED, reachesEveryOutcome: true };
})();
