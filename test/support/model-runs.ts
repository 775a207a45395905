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
