#!/usr/bin/env node
/**
 * planfence — the command line for operators, reviewers and scripts.
 * Run `planfence --help` for the commands; exit codes are listed there and in docs/cli.md
 * (exit-codes.ts is the one table). The command table is registry.ts; each command lives in
 * commands/<feature>.ts.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { LeaseNotGrantedError, PlanfenceClient } from '../client/client.js';
import { PlanfenceError, TransportError } from '../client/errors.js';
import { OPTIONS, UsageError } from './command.js';
import { deploy } from './commands/deploy.js';
import { login, logout } from './commands/login.js';
import { NO_TOKEN, tokenFor } from './commands/login-store.js';
import { drift } from './commands/preconditions.js';
import { exitCodeOf } from './exit-codes.js';
import { COMMANDS, HELP } from './registry.js';

/** The version of the installed package (its package.json, two or three folders up), or "unknown". */
function version(): string {
  // dist/src/cli/main.js in a package or a checkout; src/cli/main.ts when run from source.
  for (const up of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'planfence' && pkg.version) return pkg.version;
    } catch {
      // Not there: the other layout.
    }
  }
  return 'unknown';
}

export async function run(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
): Promise<number> {
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
    out(`planfence ${version()}`);
    return 0;
  }
  if (argv[0] === 'deploy') return deploy(argv.slice(1), out);
  if (argv[0] === 'login') return login(argv.slice(1), out);
  if (argv[0] === 'logout') return logout(argv.slice(1), out);
  // The MCP SDK is loaded only for this command: every other command starts without it.
  if (argv[0] === 'mcp') return (await import('./commands/mcp.js')).mcp(argv.slice(1));
  if (argv[0] === 'runner') return (await import('./commands/runner.js')).runner(argv.slice(1));
  if (argv[0] === 'drift') return drift(argv.slice(1), out);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: OPTIONS,
  });
  if (values.help || positionals.length === 0) {
    out(HELP);
    return values.help ? 0 : 2;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const token = tokenFor(url, values.token);
  if (!token) throw new UsageError(NO_TOKEN);
  const [group, verb, ...rest] = positionals;
  const command =
    COMMANDS[group === 'current' || group === 'audit' ? group : `${group} ${verb ?? ''}`.trim()];
  if (!command)
    throw new UsageError(`unknown command "${positionals.join(' ')}"; see planfence --help`);
  return command({
    client: new PlanfenceClient({ url, token }),
    verb,
    rest,
    values,
    out,
    print: (value, human) => out(values.json ? JSON.stringify(value, null, 2) : human()),
    need: (n, usage) => {
      if (rest.length < n) throw new UsageError(`usage: planfence ${usage}`);
    },
  });
}

/** One readable line and an exit code that scripts can branch on. */
export function describeFailure(error: unknown): { line: string; code: number } {
  if (error instanceof UsageError) return { line: error.message, code: 2 };
  if (error instanceof PlanfenceError) {
    const details = Object.entries(error.extensions)
      .filter(([k]) => k !== 'code')
      .map(
        ([k, v]) =>
          `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v as string | number)}`,
      );
    return {
      line: `${error.code}: ${error.message}${details.length ? ` (${details.join(', ')})` : ''}`,
      code: exitCodeOf(error.code),
    };
  }
  if (error instanceof TransportError) return { line: error.message, code: 8 };
  if (error instanceof LeaseNotGrantedError) return { line: error.message, code: 6 };
  if (
    error instanceof Error &&
    'code' in error &&
    String((error as { code: unknown }).code).startsWith('ERR_PARSE_ARGS')
  )
    return { line: error.message, code: 2 };
  return {
    line: `unexpected failure: ${error instanceof Error ? error.message : String(error)}`,
    code: 8,
  };
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const { line, code } = describeFailure(error);
    process.stderr.write(`planfence: ${line}\n`);
    process.exitCode = code;
  },
);
