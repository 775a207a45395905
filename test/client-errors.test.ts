/** The client knows every error code the service can answer with: one class each, with the code's details. */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as client from '../src/client/index.js';
import { ERROR_CODES } from '../src/common/errors.js';

test.each(ERROR_CODES)('the client throws a class of its own for %s', (code) => {
  const error = client.errorFromBody({ message: 'refused', extensions: { code } });
  expect(error).toBeInstanceOf(client.PlanfenceError);
  expect(error.constructor).not.toBe(client.PlanfenceError);
  expect(error.code).toBe(code);
  // The class is exported under the name it reports, so callers can catch it by name.
  expect((client as Record<string, unknown>)[error.name]).toBe(error.constructor);
});

test('an answer whose code the client does not know is still a PlanfenceError carrying that code', () => {
  const error = client.errorFromBody({ message: 'new', extensions: { code: 'SOMETHING_NEW' } });
  expect(error.constructor).toBe(client.PlanfenceError);
  expect(error.code).toBe('SOMETHING_NEW');
});

/** Every `*.errors.ts` of the service, and the codes of the ErrorCode enums it exports. */
async function serverEnumCodes(): Promise<Map<string, string>> {
  const root = fileURLToPath(new URL('../src/', import.meta.url));
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter(
    (file) => file.endsWith('.errors.ts') || file === join('common', 'errors.ts'),
  );
  expect(files.length).toBeGreaterThan(10);
  const codes = new Map<string, string>();
  for (const file of files) {
    const module = (await import(join(root, file))) as Record<string, unknown>;
    for (const [name, value] of Object.entries(module))
      if (name.endsWith('ErrorCode') && value && typeof value === 'object')
        for (const code of Object.values(value as Record<string, string>))
          codes.set(code, `${file} ${name}`);
  }
  return codes;
}

test("every code of the server's ErrorCode enums is in ERROR_CODES and has a client class", async () => {
  const codes = await serverEnumCodes();
  for (const code of ['DEPLOYMENT_ACTIVE', 'DEPLOYMENT_NOT_ACTIVE', 'CURSOR_TOO_OLD', 'QUEUE_FULL'])
    expect(codes.has(code)).toBe(true);
  for (const [code, where] of codes) {
    const error = client.errorFromBody({ message: 'refused', extensions: { code } });
    expect({ code, where, known: (ERROR_CODES as readonly string[]).includes(code) }).toEqual({
      code,
      where,
      known: true,
    });
    expect({ code, where, own: error.constructor !== client.PlanfenceError }).toEqual({
      code,
      where,
      own: true,
    });
  }
});

test('the deployment, storage and cursor errors carry their details', () => {
  const active = client.errorFromBody({
    message: 'busy',
    extensions: { code: 'DEPLOYMENT_ACTIVE', deploymentId: 'prod#3', status: 'UNKNOWN' },
  });
  expect(active).toBeInstanceOf(client.DeploymentActiveError);
  expect(active).toMatchObject({ deploymentId: 'prod#3', status: 'UNKNOWN' });
  const ended = client.errorFromBody({
    message: 'late',
    extensions: { code: 'DEPLOYMENT_NOT_ACTIVE', status: 'SUCCEEDED' },
  });
  expect(ended).toBeInstanceOf(client.DeploymentNotActiveError);
  expect((ended as client.DeploymentNotActiveError).status).toBe('SUCCEEDED');
  expect(
    client.errorFromBody({ message: 'disk', extensions: { code: 'STORAGE_UNAVAILABLE' } }),
  ).toBeInstanceOf(client.StorageUnavailableError);
  const old = client.errorFromBody({
    message: 'old',
    extensions: { code: 'CURSOR_TOO_OLD', replayLimit: 1000 },
  });
  expect(old).toBeInstanceOf(client.CursorTooOldError);
  expect((old as client.CursorTooOldError).replayLimit).toBe(1000);
});
