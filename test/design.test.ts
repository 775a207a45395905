/**
 * docs/design.md and the tests stay in step: every rule that is built is proven by a test
 * tagged `// proves: Rn` directly above it, every tag names a rule the design defines, and
 * every row of the design's rule → test index names a test in its file that carries the
 * tag of its rule.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DESIGN = readFileSync(`${ROOT}docs/design.md`, 'utf8');

/** A line that opens a test or a block of tests: `test(`, `it(`, `describe(`, `test.each(cases)(`, ... */
const OPENER = /^\s*(?:test|it|describe)(?:\.\w+)*(?:\([^)]*\))?\s*\(/;
const TAG = /^\s*\/\/\s*proves:(.*)$/;

interface Rule {
  number: number;
  beingBuilt: boolean;
}

/** The rules docs/design.md defines: a paragraph opening with `**Rn.**`, maybe followed by "(being built)". */
function definedRules(): Map<number, Rule> {
  const rules = new Map<number, Rule>();
  for (const match of DESIGN.matchAll(/^\*\*R(\d+)\.\*\*(.*)$/gm)) {
    const number = Number(match[1]);
    if (rules.has(number)) throw new Error(`R${number} is defined twice in docs/design.md`);
    rules.set(number, { number, beingBuilt: match[2].trim().startsWith('(being built)') });
  }
  return rules;
}

interface Tag {
  file: string;
  line: number;
  rules: number[];
  malformed: boolean;
  /** The line below the tag opens a test or a describe block. */
  aboveATest: boolean;
}

/** Every `// proves:` line in every TypeScript file under test/. */
function tags(): Tag[] {
  const found: Tag[] = [];
  const files = readdirSync(`${ROOT}test`, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => `test/${file.split('\\').join('/')}`)
    .sort();
  for (const file of files) {
    const lines = readFileSync(`${ROOT}${file}`, 'utf8').split('\n');
    lines.forEach((text, i) => {
      const match = TAG.exec(text);
      if (!match) return;
      const list = match[1].trim();
      const malformed = !/^R\d+(?:, R\d+)*$/.test(list);
      found.push({
        file,
        line: i + 1,
        rules: malformed ? [] : list.split(', ').map((rule) => Number(rule.slice(1))),
        malformed,
        aboveATest: OPENER.test(lines[i + 1] ?? ''),
      });
    });
  }
  return found;
}

interface IndexRow {
  rule: number;
  file: string;
  test: string;
}

/** The rows of the rule → test index: `| Rn | [file](../file) | test name |`. */
function indexRows(): IndexRow[] {
  const start = DESIGN.indexOf('## Rule → test index');
  if (start < 0) throw new Error('docs/design.md has no "Rule → test index" section');
  const rows: IndexRow[] = [];
  for (const line of DESIGN.slice(start).split('\n')) {
    const match = /^\|\s*R(\d+)\s*\|([^|]*)\|(.*)\|\s*$/.exec(line);
    if (!match) continue;
    const file = /test\/[\w./-]+\.ts/.exec(match[2])?.[0];
    if (!file) throw new Error(`an index row names no test file: ${line}`);
    rows.push({ rule: Number(match[1]), file, test: match[3].trim().replace(/\\\|/g, '|') });
  }
  return rows;
}

/** The rules tagged directly above each test (or describe block) whose title contains `name`. */
function tagsOfTestsNamed(file: string, name: string): number[][] {
  const lines = readFileSync(`${ROOT}${file}`, 'utf8').split('\n');
  const found: number[][] = [];
  lines.forEach((text, i) => {
    if (!text.includes(name)) return;
    // The title is on the opening line, or on the line after `test.each(cases)(`.
    const opener = OPENER.test(text) ? i : OPENER.test(lines[i - 1] ?? '') ? i - 1 : -1;
    if (opener < 0) return;
    const tag = TAG.exec(lines[opener - 1] ?? '');
    found.push(tag ? tag[1].split(',').map((rule) => Number(rule.trim().slice(1))) : []);
  });
  return found;
}

const rules = definedRules();
const built = [...rules.values()].filter((rule) => !rule.beingBuilt).map((rule) => rule.number);

test('docs/design.md numbers its rules R1, R2, ... without a gap, and some are built', () => {
  expect(rules.size).toBeGreaterThanOrEqual(39);
  expect([...rules.keys()]).toEqual(Array.from({ length: rules.size }, (_, i) => i + 1));
  expect(built.length).toBeGreaterThan(0);
});

test('every rule that is built has at least one proves tag under test/', () => {
  const tagged = new Set(tags().flatMap((tag) => tag.rules));
  expect(built.filter((rule) => !tagged.has(rule)).map((rule) => `R${rule}`)).toEqual([]);
});

test('every proves tag is well formed, names rules docs/design.md defines, and sits directly above a test', () => {
  const all = tags();
  expect(all.length).toBeGreaterThan(0);
  const wrong = all.flatMap((tag) => {
    const where = `${tag.file}:${tag.line}`;
    if (tag.malformed) return [`${where}: not "// proves: R1, R2"`];
    const problems = tag.rules
      .filter((rule) => !rules.has(rule))
      .map((rule) => `${where}: R${rule} is not defined in docs/design.md`);
    if (!tag.aboveATest) problems.push(`${where}: not directly above test(, it( or describe(`);
    return problems;
  });
  expect(wrong).toEqual([]);
});

test('every index row names a test in its file whose proves tag names the row’s rule', () => {
  const rows = indexRows();
  expect(rows.length).toBeGreaterThan(0);
  const wrong = rows.flatMap(({ rule, file, test: name }) => {
    const row = `R${rule} → ${file}: ${name}`;
    if (!rules.has(rule)) return [`${row}: R${rule} is not defined`];
    if (!existsSync(`${ROOT}${file}`)) return [`${row}: no such file`];
    const found = tagsOfTestsNamed(file, name);
    if (found.length === 0) return [`${row}: no test or describe block with that title`];
    if (!found.some((tagged) => tagged.includes(rule))) return [`${row}: its tag lacks R${rule}`];
    return [];
  });
  expect(wrong).toEqual([]);
});

test('the index lists a proving test for every rule that is built', () => {
  const indexed = new Set(indexRows().map((row) => row.rule));
  expect(built.filter((rule) => !indexed.has(rule)).map((rule) => `R${rule}`)).toEqual([]);
});
