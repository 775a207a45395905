import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Every Markdown file a reader of the repository opens: README.md and docs/. */
function markdownFiles(): string[] {
  return [
    join(ROOT, 'README.md'),
    ...readdirSync(join(ROOT, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => join(ROOT, 'docs', name)),
  ];
}

test('every picture the docs embed is in the repository, not in an ignored folder', () => {
  const embedded: { file: string; target: string }[] = [];
  for (const file of markdownFiles()) {
    for (const [, target] of readFileSync(file, 'utf8').matchAll(/!\[[^\]]*\]\(([^)\s]+)\)/g))
      if (!/^[a-z]+:/.test(target)) embedded.push({ file, target });
  }
  expect(embedded.length).toBeGreaterThan(0);
  const missing = embedded.filter(
    ({ file, target }) =>
      target.includes('test-output/') || !existsSync(resolve(dirname(file), target)),
  );
  expect(missing).toEqual([]);
});
