/**
 * Where the browser tests save their screenshots: test-output/ (ignored by git). With
 * PLANFENCE_DOCS_PICTURES=1 (`npm run docs:pictures`) the pictures docs/dashboard.md shows
 * go to docs/pictures/ instead, where they are committed.
 */
import { mkdirSync } from 'node:fs';

/** The screenshots docs/dashboard.md embeds (docs/pictures/<name>.png). */
export const DOCS_PICTURES = new Set([
  'console-queue-frozen',
  'console-plan-facts',
  'console-terraform',
  'console-card',
  'console-deployment',
  'console-phone-queue',
  'console-phone-diff',
]);

const DOCS = process.env.PLANFENCE_DOCS_PICTURES === '1';

/** The path of the picture `name` (e.g. "console-card"), its folder created. */
export function picture(name: string): string {
  const folder = new URL(
    DOCS && DOCS_PICTURES.has(name) ? '../../docs/pictures/' : '../../test-output/',
    import.meta.url,
  );
  mkdirSync(folder, { recursive: true });
  return new URL(`${name}.png`, folder).pathname;
}

/** Screenshots for the docs: small (CSS pixels, not device pixels). */
export const SHOT = { scale: 'css', animations: 'disabled' } as const;
