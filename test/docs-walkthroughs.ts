/**
 * Runs the walkthroughs of the docs as written: every ```sh block that follows a
 * `<!-- walkthrough -->` line, README.md's first, then each file of docs/ in name order.
 * Each file's blocks run together in one `bash` with `set -euo pipefail`, in a fresh
 * temporary folder (so `./data` and the database are new for every file), with `PORT` set
 * to a free port. `npm start` runs the built service (`dist/`, from `npm run build`) in
 * that folder, and `planfence` the built command line. A file fails when its shell fails, or
 * when an answer carries an error code that its blocks do not announce in a comment
 * (`#  → ... STALE_GENERATION`). A file whose blocks run `terraform` is skipped where
 * terraform is not on PATH.
 *
 *   npm run test:docs            # all
 *   npm run test:docs -- policies   # the files whose path contains "policies"
 *
 * Prints one line per file and exits 1 when any failed (its output follows).
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './fault/service.js';

/** The repository, found from dist/test or from test. */
const above = fileURLToPath(new URL('../', import.meta.url));
const REPO = above.endsWith('/dist/') ? join(above, '..') : above;

const MARKER = /^<!-- walkthrough -->\s*\n```sh\n([\s\S]*?)\n```/gm;
/** One file's walkthrough: at most this long. */
const FILE_BOUND_MS = 10 * 60_000;

export interface Walkthrough {
  file: string;
  blocks: string[];
}

export interface Outcome {
  file: string;
  ok: boolean;
  /** Not run: a tool its blocks need is missing (`why` names it). */
  skipped?: boolean;
  why?: string;
  output: string;
}

/** Whether `tool` is on PATH. */
function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

/** The marked blocks of README.md and docs/*.md, README first. */
export function walkthroughs(filter?: string): Walkthrough[] {
  const files = [
    'README.md',
    ...readdirSync(join(REPO, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ];
  return files
    .filter((file) => !filter || file.includes(filter))
    .map((file) => ({
      file,
      blocks: [...readFileSync(join(REPO, file), 'utf8').matchAll(MARKER)].map((m) => m[1]),
    }))
    .filter((w) => w.blocks.length > 0);
}

/** Error codes a walkthrough announces in its comments (upper-case words of `#` lines). */
function announcedCodes(blocks: string[]): Set<string> {
  const codes = new Set<string>();
  for (const line of blocks.join('\n').split('\n')) {
    const comment = line.indexOf('#');
    if (comment < 0) continue;
    for (const word of line.slice(comment).match(/\b[A-Z][A-Z_]{3,}\b/g) ?? []) codes.add(word);
  }
  return codes;
}

/** Codes of the GraphQL answers printed on `output` that the walkthrough did not announce. */
function unannounced(output: string, announced: Set<string>): string[] {
  const found: string[] = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    let answer: { errors?: { extensions?: { code?: string } }[] };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      continue;
    }
    for (const error of answer.errors ?? []) {
      const code = error.extensions?.code ?? '(no code)';
      if (!announced.has(code)) found.push(`${code}: ${line.slice(0, 300)}`);
    }
  }
  return found;
}

function alive(group: number): boolean {
  try {
    process.kill(-group, 0);
    return true;
  } catch {
    return false;
  }
}

/** Ends every process the walkthrough started (the shell's process group), and waits for it. */
async function endGroup(group: number): Promise<void> {
  for (const [signal, waitMs] of [
    ['SIGTERM', 30_000],
    ['SIGKILL', 10_000],
  ] as const) {
    if (!alive(group)) return;
    try {
      process.kill(-group, signal);
    } catch {
      return;
    }
    for (let waited = 0; waited < waitMs && alive(group); waited += 100)
      await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs one file's blocks in a fresh folder; see the top of this file. */
export async function run(walkthrough: Walkthrough): Promise<Outcome> {
  if (walkthrough.blocks.some((block) => /\bterraform\b/.test(block)) && !onPath('terraform'))
    return {
      file: walkthrough.file,
      ok: true,
      skipped: true,
      why: 'terraform is not on PATH',
      output: '',
    };
  const scratch = mkdtempSync(join(tmpdir(), 'planfence-docs-'));
  const bin = join(scratch, 'bin');
  const work = join(scratch, 'work');
  mkdirSync(bin);
  mkdirSync(work);
  writeFileSync(
    join(bin, 'npm'),
    [
      '#!/bin/sh',
      "# npm start: the built service, in the walkthrough's folder.",
      `if [ "$1" = start ]; then exec "${process.execPath}" "${join(REPO, 'dist/src/main.js')}"; fi`,
      'echo "npm $*: only npm start runs in a walkthrough" >&2',
      'exit 1',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'npm'), 0o755);
  writeFileSync(
    join(bin, 'planfence'),
    [
      '#!/bin/sh',
      '# The built command line, as `npm install planfence` puts it on PATH.',
      `exec "${process.execPath}" "${join(REPO, 'dist/src/cli/main.js')}" "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'planfence'), 0o755);
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env))
    if (name.startsWith('PLANFENCE_') || ['DATABASE_URL', 'LOG_LEVEL', 'HOST'].includes(name))
      delete env[name];
  const script = `set -euo pipefail\n${walkthrough.blocks.join('\n')}\n`;
  const child = spawn('bash', ['-c', script], {
    cwd: work,
    env: {
      ...env,
      PATH: `${bin}:${env.PATH ?? ''}`,
      PORT: String(await freePort()),
      PLANFENCE_LOG_FORMAT: 'pretty',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let timedOut = false;
  const bound = setTimeout(() => {
    timedOut = true;
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  }, FILE_BOUND_MS);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(bound);
  if (child.pid) await endGroup(child.pid);
  rmSync(scratch, { recursive: true, force: true });
  const codes = unannounced(stdout, announcedCodes(walkthrough.blocks));
  const why = timedOut
    ? `did not finish within ${FILE_BOUND_MS / 1000} s`
    : code !== 0
      ? `the shell exited with ${code}`
      : codes.length
        ? `answers with unannounced errors:\n  ${codes.join('\n  ')}`
        : undefined;
  return { file: walkthrough.file, ok: !why, why, output };
}

async function main(): Promise<void> {
  const found = walkthroughs(process.argv[2]);
  if (found.length === 0) {
    console.error('no walkthrough found');
    process.exit(1);
  }
  // Two files at a time (each in its own folder, on its own port): most of a walkthrough's
  // time is its service starting and its waits, not its CPU. Reported in the files' order.
  const outcomes: Promise<Outcome>[] = [];
  let next = 0;
  const worker = async () => {
    while (next < found.length) {
      const walkthrough = found[next++];
      const started = run(walkthrough);
      outcomes.push(started);
      await started;
    }
  };
  await Promise.all([worker(), worker()]);
  let failed = 0;
  for (const [i, outcome] of (await Promise.all(outcomes)).entries()) {
    console.log(
      `${outcome.file}: ${outcome.skipped ? `skipped (${outcome.why})` : outcome.ok ? 'ok' : 'FAILED'} (${found[i].blocks.length} block(s))`,
    );
    if (!outcome.ok) {
      failed++;
      console.log(`${outcome.why}\n--- output ---\n${outcome.output}--- end ---`);
    }
  }
  console.log(`walkthroughs=${found.length} failed=${failed}`);
  process.exit(failed ? 1 : 0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) void main();
