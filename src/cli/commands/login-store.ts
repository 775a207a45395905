/**
 * Where `planfence login` keeps a person's session tokens: credentials.json in the user's
 * config folder ($PLANFENCE_CONFIG_DIR, else $XDG_CONFIG_HOME/planfence, else
 * ~/.config/planfence), one entry per service URL. The folder is 0700 and the file 0600;
 * it is rewritten whole (a new file renamed over the old one).
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface StoredCredential {
  url: string;
  token: string;
  principal: string;
  expiresAt: string;
}

/** The folder credentials.json is in. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PLANFENCE_CONFIG_DIR) return env.PLANFENCE_CONFIG_DIR;
  const base = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(base, 'planfence');
}

export function credentialsFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(configDir(env), 'credentials.json');
}

function readAll(): Record<string, StoredCredential> {
  try {
    const parsed = JSON.parse(readFileSync(credentialsFile(), 'utf8')) as unknown;
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, StoredCredential>) : {};
  } catch {
    return {};
  }
}

function writeAll(all: Record<string, StoredCredential>): void {
  const dir = configDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = credentialsFile();
  const next = `${file}.${process.pid}.tmp`;
  writeFileSync(next, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 });
  chmodSync(next, 0o600);
  renameSync(next, file);
}

const key = (url: string) => url.replace(/\/+$/, '');

export function writeCredential(credential: StoredCredential): void {
  const all = readAll();
  all[key(credential.url)] = { ...credential, url: key(credential.url) };
  writeAll(all);
}

/** The stored token for `url`, unless it has expired; null when there is none. */
export function readCredential(url: string): StoredCredential | null {
  const found = readAll()[key(url)];
  if (!found || typeof found.token !== 'string') return null;
  return found;
}

/** The stored session token for `url` that has not reached its lifetime, for commands to use. */
export function storedToken(url: string, now = Date.now()): string | null {
  const found = readCredential(url);
  if (!found) return null;
  const ends = Date.parse(found.expiresAt);
  return Number.isFinite(ends) && ends <= now ? null : found.token;
}

/**
 * The token a command uses for the service at `url`: `--token`, else PLANFENCE_TOKEN, else
 * the session `planfence login` stored for that URL; null when there is none.
 */
export function tokenFor(url: string, given: string | undefined): string | null {
  return given ?? (process.env.PLANFENCE_TOKEN || storedToken(url));
}

/** What a command without any token says. */
export const NO_TOKEN = 'no token: pass --token, set PLANFENCE_TOKEN or run planfence login';

export function forgetCredential(url: string): void {
  const all = readAll();
  if (!(key(url) in all)) return;
  delete all[key(url)];
  writeAll(all);
}
