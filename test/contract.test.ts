/** The generated schema contains the public contract (docs/contract.graphql): names, nullability, defaults. */
import { readFileSync } from 'node:fs';
import {
  buildClientSchema,
  buildSchema,
  findBreakingChanges,
  findDangerousChanges,
  getIntrospectionQuery,
  type GraphQLSchema,
  isInputObjectType,
  isObjectType,
  isRequiredInputField,
} from 'graphql';
import { ADMIN_TOKEN, startApp, type TestApp } from './support/app.js';

let app: TestApp;
let generated: GraphQLSchema;
let contract: GraphQLSchema;

function contractSchema(): GraphQLSchema {
  return buildSchema(readFileSync(new URL('../docs/contract.graphql', import.meta.url), 'utf8'));
}

beforeAll(async () => {
  app = await startApp();
  const result = await app.gql(ADMIN_TOKEN, getIntrospectionQuery());
  generated = buildClientSchema(result.data as any);
  contract = contractSchema();
});
afterAll(() => app.close());

test('no breaking change from the contract to the generated schema', () => {
  expect(findBreakingChanges(contract, generated)).toEqual([]);
});

test('no changed default value of an argument', () => {
  expect(
    findDangerousChanges(contract, generated).filter((c) => c.type === 'ARG_DEFAULT_VALUE_CHANGE'),
  ).toEqual([]);
});

test('every field, argument and input field has the contract type and default; an added input field is optional', () => {
  const differences: string[] = [];
  for (const type of Object.values(contract.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    const mine = generated.getType(type.name);
    if (!mine) {
      differences.push(`missing type ${type.name}`);
      continue;
    }
    if (isObjectType(type) && isObjectType(mine)) {
      for (const field of Object.values(type.getFields())) {
        const other = mine.getFields()[field.name];
        if (String(other?.type) !== String(field.type))
          differences.push(`${type.name}.${field.name}: ${other?.type} != ${field.type}`);
        for (const arg of field.args) {
          const otherArg = other?.args.find((a) => a.name === arg.name);
          if (
            String(otherArg?.type) !== String(arg.type) ||
            JSON.stringify(otherArg?.defaultValue) !== JSON.stringify(arg.defaultValue)
          ) {
            differences.push(
              `${type.name}.${field.name}(${arg.name}): ${otherArg?.type} = ${otherArg?.defaultValue}`,
            );
          }
        }
      }
    }
    if (isInputObjectType(type) && isInputObjectType(mine)) {
      for (const field of Object.values(type.getFields())) {
        const other = mine.getFields()[field.name];
        if (
          String(other?.type) !== String(field.type) ||
          JSON.stringify(other?.defaultValue) !== JSON.stringify(field.defaultValue)
        ) {
          differences.push(
            `${type.name}.${field.name}: ${other?.type} = ${other?.defaultValue}, want ${field.type} = ${field.defaultValue}`,
          );
        }
      }
      // An input field beyond the contract must be one a contract client may leave out.
      for (const [name, field] of Object.entries(mine.getFields())) {
        if (!type.getFields()[name] && isRequiredInputField(field))
          differences.push(`${type.name}.${name} is not in the contract and is required`);
      }
    }
  }
  expect(differences).toEqual([]);
});
