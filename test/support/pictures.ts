/**
 * Where the browser tests save their screenshots: test-output/ (ignored by git), or
 * docs/pictures/ with PLANFENCE_DOCS_PICTURES=1 (`npm run docs:pictures`), the pictures
 * docs/dashboard.md shows.
 */
import { mkdirSync } from 'node:fs';

const DOCS = process.env.PLANFENCE_DOCS_PICTURES === '1';
const FOLDER = new URL(DOCS ? '../../docs/pictures/' : '../../test-output/', import.meta.url);

/** The path of the picture `name` (e.g. "console-queue"), its folder created. */
export function picture(name: string): string {
  mkdirSync(FOLDER, { recursive: true });
  return new URL(`${name}.png`, FOLDER).pathname;
}

/** Screenshots for the docs: small (CSS pixels, not device pixels). */
export const SHOT = { scale: 'css', animations: 'disabled' } as const;
