/**
 * The effects list a decision's transaction carries: the guard adds to it, the decision
 * runner opens it and takes what was decided. What each decision emits, as delivered, is
 * proven end to end by the suites of each feature; this file proves the list's own rules.
 */
import type { EntityManager } from 'typeorm';
import type { DeploymentOutcome } from '../src/model/deployment.entity.js';
import { addEffect, type Effect, openEffects, takeEffects } from '../src/fencing/effects.js';

const transaction = () => ({}) as EntityManager;

test('the guard decides only inside a decision: an effect outside one fails, naming the runner', () => {
  expect(() => addEffect(transaction(), { kind: 'leaseTicketChanged', id: 1 })).toThrow(
    'the guard decides only inside a decision (DecisionRunner)',
  );
});

test('a transaction takes back what was decided in it, in order, once', () => {
  const m = transaction();
  const other = transaction();
  const decided: Effect[] = [
    { kind: 'leaseTicketChanged', id: 2 },
    { kind: 'deploymentEnded', outcome: 'SUCCEEDED' as DeploymentOutcome },
    { kind: 'leaseTicketChanged', id: 1 },
  ];
  openEffects(m);
  openEffects(other);
  for (const effect of decided) addEffect(m, effect);
  expect(takeEffects(m)).toEqual(decided);
  expect(takeEffects(other)).toEqual([]);
  // Taken means closed: nothing is taken twice, and adding again is outside a decision.
  expect(takeEffects(m)).toEqual([]);
  expect(() => addEffect(m, decided[0])).toThrow('DecisionRunner');
});

test('opening a list again discards what an abandoned attempt had decided', () => {
  const m = transaction();
  openEffects(m);
  addEffect(m, { kind: 'leaseTicketChanged', id: 1 });
  openEffects(m);
  expect(takeEffects(m)).toEqual([]);
});
