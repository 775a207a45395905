/**
 * The client's types are generated, and current: docs/schema.graphql is the schema the
 * service generates now, and src/client/schema.ts is what GraphQL Code Generator makes of it
 * (`npm run codegen` writes both; scripts/client-types.mjs).
 */
import { readFileSync } from 'node:fs';
import { GraphQLSchemaHost } from '@nestjs/graphql';
// @ts-expect-error: a plain ES module script without declarations
import { schemaText, typesText } from '../scripts/client-types.mjs';
import { startApp } from './support/app.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

test('docs/schema.graphql is the schema the service generates (npm run codegen)', async () => {
  const app = await startApp();
  try {
    const schema = app.app.get(GraphQLSchemaHost).schema;
    expect((schemaText as (s: unknown) => string)(schema)).toBe(read('docs/schema.graphql'));
  } finally {
    await app.close();
  }
});

test('src/client/schema.ts holds the types of docs/schema.graphql (npm run codegen)', async () => {
  const types = await (typesText as (sdl: string) => Promise<string>)(read('docs/schema.graphql'));
  expect(types).toBe(read('src/client/schema.ts'));
});
