/**
 * Large plans wait their turn: at most LARGE_PLANS_AT_ONCE are decided at once, the others
 * in arrival order; none is refused, and one that fails passes its turn on.
 */
import { LARGE_PLANS_AT_ONCE, LargePlanGate } from '../src/plans/large-plans.js';

test('ten large submits together: at most two run at once, in arrival order, a failure passes its turn on', async () => {
  const gate = new LargePlanGate();
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const release: (() => void)[] = [];
  const jobs = Array.from({ length: 10 }, (_, i) =>
    gate
      .run(async () => {
        running++;
        most = Math.max(most, running);
        started.push(i);
        await new Promise<void>((resolve) => release.push(resolve));
        running--;
        if (i === 3) throw new Error('refused by the guard');
        return i;
      })
      .then(
        (value) => ({ value }),
        (error: Error) => ({ error: error.message }),
      ),
  );
  // Let the waiting ones queue, then finish the jobs one by one in the order they started.
  for (let done = 0; done < 10; done++) {
    await new Promise((resolve) => setImmediate(resolve));
    expect(running).toBeLessThanOrEqual(LARGE_PLANS_AT_ONCE);
    release.shift()!();
  }
  const outcomes = await Promise.all(jobs);
  expect(most).toBe(LARGE_PLANS_AT_ONCE);
  expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  expect(outcomes.filter((o) => 'value' in o)).toHaveLength(9);
  expect(outcomes[3]).toEqual({ error: 'refused by the guard' });
  expect(gate.queued).toBe(0);
});
