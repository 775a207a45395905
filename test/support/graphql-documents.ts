/**
 * The GraphQL documents the project ships, found by reading its files: every string or
 * template literal in TypeScript and JavaScript that is a GraphQL operation, with its
 * `${NAME}` parts replaced by the constant of that name (selection fragments such as the
 * client's PLAN), a conditional by its first branch (so the optional fields are checked
 * too), an expression that builds text from a template by that template, and anything
 * else by `__typename`; and in Markdown, each ```graphql block
 * and each `"query": "…"` of a JSON body.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export interface ShippedDocument {
  /** Relative to the repository. */
  file: string;
  line: number;
  text: string;
}

const ROOT = new URL('../..', import.meta.url).pathname;
/** Where documents are shipped from. */
const PLACES = ['src', 'public', 'examples', 'docs', 'README.md', 'demo'];
/** A literal whose text starts like an operation. */
const OPERATION =
  /^\s*(query|mutation|subscription)\b[\s\w$:!,()[\]]*\{|^\s*\{\s*[A-Za-z_]\w*\s*[({:]/;

export function shippedDocuments(): ShippedDocument[] {
  const files = PLACES.flatMap((place) => [...filesUnder(join(ROOT, place))]);
  const code = files.filter((f) => /\.(ts|js|mjs)$/.test(f) && !f.endsWith('.d.ts'));
  const sources = code.map((f) =>
    ts.createSourceFile(f, readFileSync(f, 'utf8'), ts.ScriptTarget.Latest, true),
  );
  // Constants by name across every file: a fragment may be imported from another module.
  const everywhere = new Map<string, ts.Expression>();
  const perFile = new Map<ts.SourceFile, Map<string, ts.Expression>>();
  for (const source of sources) {
    const own = new Map<string, ts.Expression>();
    const visit = (node: ts.Node) => {
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
        own.set(node.name.text, node.initializer);
        if (!everywhere.has(node.name.text)) everywhere.set(node.name.text, node.initializer);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    perFile.set(source, own);
  }
  const documents: ShippedDocument[] = [];
  for (const source of sources) {
    const own = perFile.get(source)!;
    const text = (node: ts.Node, depth: number): string => {
      if (depth > 8) return '__typename';
      if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
      if (ts.isTemplateExpression(node))
        return (
          node.head.text +
          node.templateSpans.map((s) => part(s.expression, depth) + s.literal.text).join('')
        );
      return part(node as ts.Expression, depth);
    };
    const part = (expression: ts.Expression, depth: number): string => {
      if (ts.isIdentifier(expression)) {
        const init = own.get(expression.text) ?? everywhere.get(expression.text);
        return init ? text(init, depth + 1) : '__typename';
      }
      if (ts.isParenthesizedExpression(expression)) return part(expression.expression, depth);
      if (ts.isConditionalExpression(expression)) return part(expression.whenTrue, depth);
      // Built at run time (`names.map((n, i) => \`e${i}: environment(name: $e${i}) {…}\`)`):
      // the template it repeats, once.
      const repeated = firstTemplate(expression);
      if (repeated) return text(repeated, depth + 1);
      if (
        ts.isStringLiteral(expression) ||
        ts.isNoSubstitutionTemplateLiteral(expression) ||
        ts.isTemplateExpression(expression)
      )
        return text(expression, depth + 1);
      return '__typename';
    };
    const visit = (node: ts.Node) => {
      if (
        ts.isStringLiteral(node) ||
        ts.isNoSubstitutionTemplateLiteral(node) ||
        ts.isTemplateExpression(node)
      ) {
        // Variable definitions built at run time (`query(${params})`) drop out with their use.
        const value = text(node, 0).replace(
          /^(\s*(?:query|mutation|subscription)\s*)\(__typename\)/,
          '$1',
        );
        if (OPERATION.test(value))
          documents.push({
            file: relative(ROOT, source.fileName),
            line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1,
            text: value,
          });
        return;
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  for (const file of files.filter((f) => f.endsWith('.md')))
    documents.push(...markdownDocuments(file));
  return documents;
}

/** The first template literal inside an expression, depth first. */
function firstTemplate(node: ts.Node): ts.TemplateLiteral | undefined {
  if (ts.isTemplateExpression(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node;
  return ts.forEachChild(node, firstTemplate);
}

function markdownDocuments(file: string): ShippedDocument[] {
  const body = readFileSync(file, 'utf8');
  const lineOf = (index: number) => body.slice(0, index).split('\n').length;
  const found: ShippedDocument[] = [];
  // A block may hold several operations, one per line: each is a document.
  for (const block of body.matchAll(/```graphql\n([\s\S]*?)```/g))
    for (const text of block[1].split(/\n(?=query|mutation|subscription|\{)/))
      found.push({ file: relative(ROOT, file), line: lineOf(block.index), text });
  // A JSON body written in a shell command: "query":"…" (shell variables read as strings).
  for (const json of body.matchAll(/"query"\s*:\s*"((?:[^"\\]|\\.)*)"/g)) {
    let text: string;
    try {
      text = JSON.parse(`"${json[1]}"`) as string;
    } catch {
      continue;
    }
    if (OPERATION.test(text))
      found.push({ file: relative(ROOT, file), line: lineOf(json.index), text });
  }
  return found;
}

function* filesUnder(path: string): Generator<string> {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return;
  if (stat.isFile()) {
    yield path;
    return;
  }
  for (const entry of readdirSync(path)) {
    if (entry === 'node_modules' || entry.startsWith('.')) continue;
    yield* filesUnder(join(path, entry));
  }
}
