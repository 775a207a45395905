import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createApp } from '../../src/app.js';
import { ManualClock } from '../../src/common/clock.js';
import { loadConfig } from '../../src/config/config.js';

export const ADMIN_TOKEN = 'pf_admin_token_for_tests_0123456789';

export interface GqlResult<T = Record<string, any>> {
  status: number;
  data: T | null;
  errors?: { message: string; extensions?: Record<string, any> }[];
}

export interface TestApp {
  url: string;
  clock: ManualClock;
  app: NestFastifyApplication;
  /** Sends one GraphQL operation over HTTP as the holder of `token` (or none). */
  gql<T = Record<string, any>>(
    token: string | null,
    query: string,
    variables?: Record<string, unknown>,
  ): Promise<GqlResult<T>>;
  close(): Promise<void>;
}

/** A scratch folder that is removed when `cleanup` runs. */
export function scratchDir(): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), 'planfence-test-'));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/** Starts the real service on a loopback port: `sqlite::memory:` unless another DATABASE_URL is given. */
export async function startApp(
  env: Record<string, string> = {},
  clock = new ManualClock(),
): Promise<TestApp> {
  const scratch = scratchDir();
  const config = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
    PLANFENCE_ADMIN_TOKEN_FILE: join(scratch.path, 'admin-token'),
    ...env,
  });
  const app = await createApp(config, { clock, logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  return {
    url,
    clock,
    app,
    async gql(token, query, variables = {}) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, variables }),
      });
      const body = (await response.json()) as GqlResult;
      return { ...body, status: response.status } as any;
    },
    async close() {
      await app.close();
      scratch.cleanup();
    },
  };
}

/** The error code of a GraphQL answer, or 'OK' when it has none. */
export function codeOf(result: GqlResult): string {
  return result.errors?.[0]?.extensions?.code ?? 'OK';
}

/** The data of an answer that must have succeeded. */
export function ok<T>(result: GqlResult<T>): T {
  if (result.errors?.length) {
    throw new Error(`expected success, got ${JSON.stringify(result.errors)}`);
  }
  return result.data as T;
}
