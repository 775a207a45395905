import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Whether a suite runs code from dist/ (the built command line, the fault harnesses, the
 * docs' walkthroughs…), and whether that build is older than its sources. A suite that
 * needs the build refuses to run on a stale one: it would pass or fail against code that
 * is no longer the tree's. `npm test` builds first; `npm run test:one` does not.
 */

const ROOT = new URL('../..', import.meta.url).pathname;
/** What tsconfig.build.json compiles, as roots under the repository. */
const BUILT_ROOTS = [
  'src',
  'migrations',
  'test/fault',
  'test/docs-walkthroughs.ts',
  'test/hostile/play.ts',
  'demo',
  'bench',
  'examples',
];

/** A suite's text names a file under dist/ or a helper that runs one. */
export function needsBuild(testPath) {
  const text = readFileSync(testPath, 'utf8');
  return /\bdist\/|\bPLANFENCE_BIN\b|\bBIN\b|docs-walkthroughs/.test(text);
}

let cached;
/** The first source newer than its built file (or without one), or null when dist/ is current. */
export function staleSource() {
  if (cached !== undefined) return cached;
  cached = null;
  for (const root of BUILT_ROOTS) {
    for (const source of typeScriptFiles(join(ROOT, root))) {
      const rel = relative(ROOT, source);
      const built = join(ROOT, 'dist', rel.replace(/\.ts$/, '.js'));
      if (!existsSync(built) || statSync(built).mtimeMs < statSync(source).mtimeMs) {
        cached = rel;
        return cached;
      }
    }
  }
  return cached;
}

function* typeScriptFiles(path) {
  if (!existsSync(path)) return;
  const stat = statSync(path);
  if (stat.isFile()) {
    if (path.endsWith('.ts') && !path.endsWith('.d.ts') && !path.endsWith('.test.ts')) yield path;
    return;
  }
  for (const entry of readdirSync(path)) yield* typeScriptFiles(join(path, entry));
}
