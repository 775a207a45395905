/**
 * The order, and under mutation testing the choice, of the test files jest runs.
 *
 * Stryker runs each mutant with the tests that cover it, named in jest's
 * `testNamePattern`; jest would still load every test file of the run to find them (each
 * load imports the service: seconds per file), only to skip all but a few. During
 * Stryker's first run, with no mutant active, the test environment (environment.js) notes
 * which file holds each test; for a mutant's run this sequencer keeps the files that hold a
 * test the pattern names, the shortest first. Where a name is not in the notes, every file
 * runs, as without it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import LongestFirst from './sequencer.js';

/** Where the first run's notes are kept: in the run's copy of the repository. */
export function mutationTestIndex(rootDir) {
  return join(rootDir, '.mutation-tests.jsonl');
}

export default class MutationSequencer extends LongestFirst {
  constructor(options) {
    super(options);
    this.pattern = options?.globalConfig?.testNamePattern || null;
  }

  sort(tests) {
    const sorted = super.sort(tests);
    if (!sorted.length) return sorted;
    const index = mutationTestIndex(sorted[0].context.config.rootDir);
    if (!process.env.__STRYKER_ACTIVE_MUTANT__) {
      // The first run (every test, no mutant): its notes start afresh.
      writeFileSync(index, '');
      return sorted;
    }
    let notes;
    try {
      notes = readFileSync(index, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
    } catch {
      return sorted;
    }
    // The shortest file first: a mutant's run stops at the first test that fails
    // (environment.js), and most mutants fail a test in any file that covers them.
    const seconds = new Map();
    for (const { file, seconds: took } of notes) if (took !== undefined) seconds.set(file, took);
    const took = (test) => seconds.get(test.path) ?? Infinity;
    const shortestFirst = (list) => list.sort((a, b) => took(a) - took(b));
    // A mutant of what runs when a module loads (Stryker's static mutants) runs every test.
    if (!this.pattern) return shortestFirst(sorted);
    // jest matches the pattern against each test's full name, ignoring case.
    const pattern = new RegExp(this.pattern, 'i');
    const named = new Set();
    const files = new Set();
    for (const { name, file } of notes)
      if (name !== undefined && pattern.test(name)) {
        named.add(name);
        files.add(file);
      }
    // Stryker's pattern is one `(name)` per test, joined by `|`.
    const asked = this.pattern.split(')|(').length;
    if (named.size < asked) return sorted;
    return shortestFirst(sorted.filter((test) => files.has(test.path)));
  }
}
