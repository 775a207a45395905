/**
 * Every GraphQL document the project ships is valid against the schema the service
 * generates: the client, the command line, the console, the examples and the docs. A
 * field renamed on the service, or mistyped in a console query, fails here rather than
 * on a reviewer's screen (test/support/graphql-documents.ts finds the documents).
 */
import {
  buildClientSchema,
  getIntrospectionQuery,
  type GraphQLSchema,
  parse,
  validate,
} from 'graphql';
import { ADMIN_TOKEN, startApp } from './support/app.js';
import { shippedDocuments } from './support/graphql-documents.js';

let schema: GraphQLSchema;

beforeAll(async () => {
  const app = await startApp();
  try {
    schema = buildClientSchema((await app.gql(ADMIN_TOKEN, getIntrospectionQuery())).data as any);
  } finally {
    await app.close();
  }
});

const documents = shippedDocuments();

test('the documents are found in every place that ships them', () => {
  const places = new Set(documents.map((d) => d.file.split('/')[0]));
  for (const place of ['src', 'public', 'docs'])
    expect({ place, found: places.has(place) }).toEqual({ place, found: true });
  // The client and the command line alone send far more than this.
  expect(documents.length).toBeGreaterThan(80);
});

test('every shipped document is valid against the generated schema', () => {
  const invalid = documents.flatMap(({ file, line, text }) => {
    try {
      return (
        validate(schema, parse(text))
          // A value built at run time reads `__typename` here: its type is not knowable.
          .filter((e) => !e.message.includes('__typename'))
          .map((e) => `${file}:${line}: ${e.message}`)
      );
    } catch (error) {
      return [`${file}:${line}: ${(error as Error).message}`];
    }
  });
  expect(invalid).toEqual([]);
});

test('a wrong field in a console query is found', () => {
  const planted = documents.find((d) => d.file.startsWith('public/'));
  expect(planted).toBeDefined();
  const wrong = planted!.text.replace(/\{/, '{ notAFieldOfThisType ');
  expect(
    validate(schema, parse(wrong))
      .map((e) => e.message)
      .join('\n'),
  ).toMatch(/Cannot query field "notAFieldOfThisType"/);
});
