/**
 * Only the guard (src/fencing/) writes protected state: an environment's fence, pointer,
 * counters and deployment sequence; a plan's status and content; leases, lease tickets and
 * deployments. This reads every SQL text in src/ outside fencing/ and fails on a statement
 * that writes any of them (test/support/protected-writes.ts).
 */
import { protectedWritesOutsideTheGuard, protectedWritesIn } from './support/protected-writes.js';

test('no SQL outside src/fencing/ writes protected state', () => {
  expect(protectedWritesOutsideTheGuard()).toEqual([]);
});

describe('the scan finds a protected write however it is spelled', () => {
  test.each([
    [
      'UPDATE plans SET status',
      "await execute(m, `UPDATE plans SET status = 'PUBLISHED' WHERE id = :id`, { id });",
    ],
    [
      'a quoted table and a second column',
      `execute(m, 'update "plans" set title = :t, content = :c where id = :id', p);`,
    ],
    [
      'the fence',
      "execute(m, 'UPDATE environments SET fence = fence + 1 WHERE name = :n', { n });",
    ],
    ['the pointer', "execute(m, 'UPDATE environments SET current_plan_id = NULL')"],
    ['a lease row', "execute(m, 'DELETE FROM leases WHERE environment = :e', { e })"],
    ['a ticket', "execute(m, 'INSERT INTO lease_tickets (id) VALUES (:id)', { id })"],
    ['a deployment', "execute(m, `UPDATE deployments SET status = 'FAILED'`)"],
  ])('%s', (_name, source) => {
    expect(protectedWritesIn('src/planted.ts', source)).toHaveLength(1);
  });

  test.each([
    ['a read', "select(m, 'SELECT status, content FROM plans WHERE id = :id', { id })"],
    [
      'a column that is not protected',
      "execute(m, 'UPDATE environments SET require_approval = 1')",
    ],
    ['another table', "execute(m, 'DELETE FROM idempotency_records WHERE expires_at <= :now')"],
  ])('but not %s', (_name, source) => {
    expect(protectedWritesIn('src/planted.ts', source)).toEqual([]);
  });
});
