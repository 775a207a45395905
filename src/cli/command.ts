import { readFileSync } from 'node:fs';
import type { parseArgs } from 'node:util';
import type { Plan, PlanfenceClient } from '../client/client.js';
import { NotFoundError } from '../client/errors.js';

/** Wrong arguments: exit code 2 with the usage line. */
export class UsageError extends Error {}

/**
 * A file the command was given (`-`: standard input), as text or as bytes; one that cannot
 * be read is bad input (exit code 2) that names it, e.g. `cannot read the plan file
 * ./plan.txt: ENOENT: no such file or directory`.
 */
export function readInput(path: string, what: string): string;
export function readInput(path: string, what: string, bytes: 'bytes'): Buffer;
export function readInput(path: string, what: string, bytes?: 'bytes'): string | Buffer {
  const source = path === '-' ? 0 : path;
  try {
    return bytes ? readFileSync(source) : readFileSync(source, 'utf8');
  } catch (error) {
    const name = source === 0 ? 'standard input' : source;
    throw new UsageError(`cannot read the ${what} ${name}: ${(error as Error).message}`);
  }
}

export type Values = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>
>['values'];

/** Something the service answered with nothing: NOT_FOUND, exit code 4 like the service's own. */
export function notFound(message: string): NotFoundError {
  return new NotFoundError({ message, extensions: { code: 'NOT_FOUND' } });
}

/** Every option any command takes (node:util parseArgs). */
export const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', default: false },
  mode: { type: 'string' },
  'no-approval': { type: 'boolean', default: false },
  ttl: { type: 'string' },
  instance: { type: 'string' },
  file: { type: 'string' },
  title: { type: 'string' },
  'based-on': { type: 'string' },
  key: { type: 'string' },
  hash: { type: 'string' },
  reason: { type: 'string' },
  status: { type: 'string' },
  first: { type: 'string' },
  watch: { type: 'boolean', default: false },
  interval: { type: 'string' },
  rule: { type: 'string', multiple: true },
  group: { type: 'string', multiple: true },
  'break-glass': { type: 'string' },
  terraform: { type: 'string' },
  chdir: { type: 'string' },
  generation: { type: 'string' },
  'deployment-sequence': { type: 'string' },
  'source-revision': { type: 'string' },
  'policy-file': { type: 'string' },
  'content-type': { type: 'string' },
  'max-wait': { type: 'string' },
  environments: { type: 'string', multiple: true },
  'expires-in': { type: 'string' },
  event: { type: 'string', multiple: true },
  format: { type: 'string' },
  'batch-size': { type: 'string' },
  artifact: { type: 'boolean', default: false },
  summary: { type: 'string' },
  'details-url': { type: 'string' },
  'required-checks': { type: 'string' },
  'promote-from': { type: 'string' },
  soak: { type: 'string' },
  'deploy-within': { type: 'string' },
} as const;

/** What a command gets: the client, its arguments after the command words, and the printers. */
export interface CommandContext {
  client: PlanfenceClient;
  /** The second word (the environment for `current` and `audit`). */
  verb: string | undefined;
  rest: string[];
  values: Values;
  out: (text: string) => void;
  /** JSON with --json, else the human text. */
  print: (value: unknown, human: () => string) => void;
  /** Throws a UsageError unless `rest` holds `n` arguments. */
  need: (n: number, usage: string) => void;
}

export type Command = (context: CommandContext) => Promise<number>;

export function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return `${value}`;
  return JSON.stringify(value);
}

export function table(rows: Record<string, unknown>[]): string {
  if (!rows.length) return '(none)';
  const columns = Object.keys(rows[0]);
  const text = cell;
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => text(r[c]).length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [
    line(columns.map((c) => c.toUpperCase())),
    ...rows.map((r) => line(columns.map((c) => text(r[c])))),
  ].join('\n');
}

export const planRow = (p: Plan) => ({
  id: p.id,
  status: p.status,
  title: p.title,
  submittedBy: p.submittedBy,
  reviewedBy: p.reviewedBy,
  submittedAt: p.submittedAt,
});

export function integer(value: string | undefined, what: string): number {
  if (value === undefined || !/^\d+$/.test(value))
    throw new UsageError(`${what} must be a whole number (got ${value ?? 'nothing'})`);
  return Number(value);
}

/** Rules as `GROUP:COUNT`, `*` for any group. */
export function pending(rules: { group: string | null; count: number }[]): string {
  return rules.map((rule) => `${rule.group ?? '*'}:${rule.count}`).join(', ') || 'nothing';
}
