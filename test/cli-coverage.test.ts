/**
 * The command line covers the contract: every mutation an operator runs by hand has a command
 * (or is listed as a deliberate exception with its reason), every command named in the table
 * exists and is in --help, and every error code of the service has an exit code.
 */
import { readFileSync } from 'node:fs';
import { ERROR_CODES } from '../src/common/errors.js';
import { DEPLOY_HELP } from '../src/cli/commands/deploy.js';
import { EXIT_CODES } from '../src/cli/exit-codes.js';
import { COMMANDS, HELP, MUTATIONS, NOT_A_COMMAND, OWN_PARSERS } from '../src/cli/registry.js';

const contract = readFileSync(new URL('../docs/contract.graphql', import.meta.url), 'utf8');

function mutations(): string[] {
  const block = /type Mutation \{([\s\S]*?)\n\}/.exec(contract);
  expect(block).not.toBeNull();
  return [...block![1].matchAll(/^\s{2}(\w+)\s*[(:]/gm)].map((match) => match[1]);
}

test('every mutation of the contract is run by a command, or is a listed exception', () => {
  const schema = mutations();
  expect(schema.length).toBeGreaterThan(20);
  const covered = new Set([...Object.values(MUTATIONS).flat(), ...Object.keys(NOT_A_COMMAND)]);
  expect(schema.filter((name) => !covered.has(name))).toEqual([]);
  // No command claims a mutation the contract does not have.
  expect([...covered].filter((name) => !schema.includes(name))).toEqual([]);
});

test('every command of the table exists and is in the help', () => {
  for (const command of Object.keys(MUTATIONS)) {
    const [word, verb] = command.split(' ');
    if ((OWN_PARSERS as readonly string[]).includes(word)) {
      expect(word === 'deploy' ? DEPLOY_HELP : HELP).toContain(`${command} `);
      continue;
    }
    expect({ command, known: command in COMMANDS }).toEqual({ command, known: true });
    expect(HELP).toContain(`  ${word} ${verb}`);
  }
  for (const command of Object.keys(COMMANDS)) expect(HELP).toContain(`  ${command}`);
});

test('every error code of the service has an exit code, named in the help', () => {
  expect(ERROR_CODES.filter((code) => !(code in EXIT_CODES))).toEqual([]);
  for (const code of ERROR_CODES) expect(HELP).toContain(code);
});

test('docs/cli.md lists the same exit code for every error code', () => {
  const doc = readFileSync(new URL('../docs/cli.md', import.meta.url), 'utf8');
  for (const [code, exit] of Object.entries(EXIT_CODES))
    expect({ code, row: new RegExp(`^\\| \`${exit}\` \\|.*\`${code}\``, 'm').test(doc) }).toEqual({
      code,
      row: true,
    });
});
