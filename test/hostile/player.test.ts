/**
 * The on-demand attack player (npm run test:hostile) against the real service: it plays
 * every attack of the hostile probe, reports each with a verdict, and sums them up.
 * Attacks whose defence this build already has must be reported as held.
 */
import { startApp, ADMIN_TOKEN, type TestApp } from '../support/app.js';
import { ATTACKS, play, type Verdict } from './play.js';

/** Defences present in this build: the player must find them holding. */
const HOLDING = ['operation-name-6mb'];

let app: TestApp;

beforeAll(async () => {
  app = await startApp();
});
afterAll(async () => {
  await app?.close();
});

test('the player plays every attack against a running service and gives each a verdict', async () => {
  const lines: string[] = [];
  const verdicts: Verdict[] = await play(
    {
      url: app.url,
      adminToken: ADMIN_TOKEN,
      // The waits for the server to close a connection are short here; the verdict is what counts.
      slowBodySeconds: 3,
      wsInitSeconds: 3,
      requestSeconds: 300,
    },
    (line) => lines.push(line),
  );

  expect(verdicts.map((v) => v.name)).toEqual(ATTACKS.map((a) => a.name));
  for (const verdict of verdicts) {
    expect(verdict.held).not.toBeNull();
    expect(verdict.observed.length).toBeGreaterThan(0);
    expect(verdict.observed).not.toMatch(/^the attack failed/);
  }
  expect(lines).toHaveLength(ATTACKS.length + 1);
  ATTACKS.forEach((attack, i) => {
    expect(lines[i].startsWith(`${attack.name} | expected: ${attack.expected} | observed: `)).toBe(
      true,
    );
    expect(lines[i]).toMatch(/ \| (held|BROKEN)$/);
  });
  const held = verdicts.filter((v) => v.held).length;
  expect(lines[ATTACKS.length]).toBe(`attacks=${ATTACKS.length} held=${held}`);

  for (const name of HOLDING) {
    expect(verdicts.find((v) => v.name === name)).toMatchObject({ held: true });
  }
  // The service still answers after the whole probe.
  expect((await fetch(`${app.url}/health`)).status).toBe(200);
}, 900_000);

test('without an ADMIN token the attacks that need a role are listed as skipped', async () => {
  const needRoles = ATTACKS.filter((a) => a.needsRoles).map((a) => a.name);
  const lines: string[] = [];
  const verdicts = await play(
    { url: app.url, only: [...needRoles, 'operation-name-6mb'], requestSeconds: 300 },
    (line) => lines.push(line),
  );
  expect(verdicts.filter((v) => v.held === null).map((v) => v.name)).toEqual(needRoles);
  expect(verdicts.find((v) => v.name === 'operation-name-6mb')).toMatchObject({ held: true });
  expect(lines[lines.length - 1]).toBe(`attacks=1 held=1 skipped=${needRoles.length}`);
}, 900_000);
