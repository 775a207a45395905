// Fails (exit 1) when folders of src/ import one another in a cycle; run by `npm run lint:deps`.
//
// Each top-level folder of src/ is a node; an import of a module of folder B by a module of
// folder A is an edge A -> B. Only imports the code runs count: an `import type` names a
// shape and may point anywhere the layering rules of .dependency-cruiser.cjs allow. Each group
// of folders that reach one another (a strongly connected component) is printed with the
// imports that tie it, then the script exits 1. Module-level cycles and imports that point to
// a higher floor are .dependency-cruiser.cjs's rules; this is the folder-level one it cannot
// say: its `scope: "folder"` rules count every import, `import type` ones included.
//
// Usage: node scripts/folder-cycles.mjs [DIR]   (DIR: src, the default)
import { createRequire } from 'node:module';
import { cruise } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const require = createRequire(import.meta.url);
const { options } = require('../.dependency-cruiser.cjs');
const root = process.argv[2] ?? 'src';

const { output } = await cruise(
  [root],
  { ...options, tsConfig: undefined },
  {},
  { tsConfig: extractTSConfig(options.tsConfig.fileName) },
);

/** `src/auth/auth.service.ts` → `auth`; null for a file directly in `root`. */
const folderOf = (path) => {
  const prefix = `${root}/`;
  if (!path?.startsWith(prefix)) return null;
  const rest = path.slice(prefix.length);
  const slash = rest.indexOf('/');
  return slash > 0 ? rest.slice(0, slash) : null;
};

/** `from -> to` → the runtime imports behind that edge (`file => file`). */
const edges = new Map();
for (const module of output.modules) {
  const from = folderOf(module.source);
  if (!from) continue;
  for (const dependency of module.dependencies) {
    const to = folderOf(dependency.resolved);
    if (!to || to === from || dependency.dependencyTypes.includes('type-only')) continue;
    const key = `${from} -> ${to}`;
    if (!edges.has(key)) edges.set(key, []);
    edges.get(key).push(`${module.source} => ${dependency.resolved}`);
  }
}

const next = new Map();
for (const key of edges.keys()) {
  const [from, to] = key.split(' -> ');
  if (!next.has(from)) next.set(from, []);
  if (!next.has(to)) next.set(to, []);
  next.get(from).push(to);
}

/** The groups of folders that reach one another (Tarjan), without the edge `skip` (`from -> to`). */
function cycles(skip = null) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let counter = 0;
  function visit(node) {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const other of next.get(node)) {
      if (`${node} -> ${other}` === skip) continue;
      if (!index.has(other)) {
        visit(other);
        low.set(node, Math.min(low.get(node), low.get(other)));
      } else if (onStack.has(other)) low.set(node, Math.min(low.get(node), index.get(other)));
    }
    if (low.get(node) !== index.get(node)) return;
    const group = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      group.push(member);
    } while (member !== node);
    if (group.length > 1) found.push(group.sort());
  }
  for (const node of [...next.keys()].sort()) if (!index.has(node)) visit(node);
  return found;
}

const groups = cycles();
if (groups.length === 0) {
  console.log(
    `folder-cycles: no cycle among the ${next.size} folders of ${root}/ (${edges.size} runtime edges)`,
  );
  process.exit(0);
}
/** The shortest path of folders from `start` to `goal` inside `members`, both ends included. */
function shortestPath(start, goal, members) {
  const cameFrom = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    if (node === goal) break;
    for (const other of next.get(node))
      if (members.has(other) && !cameFrom.has(other)) {
        cameFrom.set(other, node);
        queue.push(other);
      }
  }
  const path = [];
  for (let node = goal; node !== null; node = cameFrom.get(node)) path.unshift(node);
  return path;
}

for (const group of groups) {
  const members = new Set(group);
  const inside = [...edges]
    .filter(([key]) => key.split(' -> ').every((folder) => members.has(folder)))
    .sort(([a, x], [b, y]) => x.length - y.length || a.localeCompare(b));
  // The edge without which the fewest of these folders are still in a cycle: likely the one to move.
  const stillCyclic = (key) =>
    cycles(key)
      .filter((other) => other.some((folder) => members.has(folder)))
      .reduce((sum, other) => sum + other.length, 0);
  const [first] = inside
    .map(([key]) => ({ key, left: stillCyclic(key) }))
    .sort((x, y) => x.left - y.left);
  const [from, to] = first.key.split(' -> ');
  console.error(
    `error folder-cycle: ${group.map((folder) => `${root}/${folder}/`).join(', ')} import one another`,
  );
  console.error(
    `  for one: ${[from, ...shortestPath(to, from, members)].join(' -> ')}; without ${first.key}, ${first.left === 0 ? 'none of them is' : `${first.left} of them are still`} in a cycle`,
  );
  console.error('  the imports between them, the fewest first:');
  for (const [key, imports] of inside) {
    console.error(`  ${key}`);
    for (const line of imports.slice(0, 5)) console.error(`      ${line}`);
    if (imports.length > 5) console.error(`      … ${imports.length - 5} more`);
  }
}
console.error(
  `\nx ${groups.length} folder cycle(s): move what the folders share to the lower one (or to common/), never hide the import.`,
);
process.exit(1);
