/**
 * `planfence login` for a person at a terminal (DESIGN §19): the authorization code flow
 * with PKCE and a loopback redirect (RFC 8252), run by the service. The command listens on
 * http://127.0.0.1:PORT/callback, sends the person's browser to the service's
 * /auth/login with that address, its state and an S256 challenge; the service signs the
 * person in with the organisation's provider and redirects back with a one-time code, which
 * the command exchanges (with its verifier) at /auth/cli-token for a session token. The
 * token is stored in the user's config folder (mode 0600) by service URL; `planfence
 * logout` ends the session and forgets it.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../command.js';
import { forgetCredential, readCredential, writeCredential } from './login-store.js';

/** How long the command waits for the person to finish signing in. */
const WAIT_MS = 5 * 60_000;

export interface BrowserLoginOptions {
  url: string;
  /** Which of the service's providers (its index in `logins`); default the first. */
  provider?: number;
  /** Do not try to open a browser: only print the address. */
  noBrowser?: boolean;
  /** Where the address to open is written (stderr). */
  tell: (text: string) => void;
}

export interface SignedInCredential {
  url: string;
  token: string;
  principal: string;
  expiresAt: string;
}

/** The sign-in providers the service at `url` offers people (GET /auth/logins); empty when none or unreachable. */
export async function offeredLogins(url: string): Promise<{ label: string }[]> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, '')}/auth/logins`);
    if (!response.ok) return [];
    const body = (await response.json()) as { logins?: { label: string }[] };
    return Array.isArray(body.logins) ? body.logins : [];
  } catch {
    return [];
  }
}

/** Runs the sign-in and stores the session token; resolves with what was stored. */
export async function browserLogin(options: BrowserLoginOptions): Promise<SignedInCredential> {
  const url = options.url.replace(/\/+$/, '');
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const state = randomBytes(24).toString('base64url');
  let settle!: (result: { code: string } | { error: string }) => void;
  const answered = new Promise<{ code: string } | { error: string }>((resolve) => {
    settle = resolve;
  });
  const server = createServer((req, res) => {
    const at = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (at.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    const code = at.searchParams.get('code');
    const ok = code && at.searchParams.get('state') === state;
    res
      .writeHead(ok ? 200 : 400, { 'content-type': 'text/html; charset=utf-8' })
      .end(
        ok
          ? '<!doctype html><title>planfence</title><p>Signed in. You can close this tab and return to the terminal.</p>'
          : '<!doctype html><title>planfence</title><p>This sign-in does not belong to the waiting command.</p>',
      );
    if (ok) settle({ code });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const timer = setTimeout(
    () => settle({ error: `no sign-in within ${WAIT_MS / 60_000} minutes` }),
    WAIT_MS,
  );
  try {
    const start = new URL(`${url}/auth/login`);
    if (options.provider !== undefined) start.searchParams.set('login', String(options.provider));
    start.searchParams.set('cli_redirect', `http://127.0.0.1:${port}/callback`);
    start.searchParams.set('cli_state', state);
    start.searchParams.set('cli_challenge', challenge);
    options.tell(`Open this address in a browser to sign in:\n  ${start.href}`);
    if (!options.noBrowser) openBrowser(start.href);
    const result = await answered;
    if ('error' in result) throw new UsageError(`sign-in failed: ${result.error}`);
    const response = await fetch(`${url}/auth/cli-token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: result.code, verifier }),
    });
    const body = (await response.json().catch(() => ({}))) as {
      token?: string;
      principal?: string;
      expiresAt?: string;
      message?: string;
    };
    if (!response.ok || !body.token)
      throw new UsageError(`sign-in failed: ${body.message ?? `HTTP ${response.status}`}`);
    const credential = {
      url,
      token: body.token,
      principal: body.principal ?? '',
      expiresAt: body.expiresAt ?? '',
    };
    writeCredential(credential);
    return credential;
  } finally {
    clearTimeout(timer);
    server.closeAllConnections();
    server.close();
  }
}

/** Best effort: the platform's opener; the printed address is the fallback. */
function openBrowser(address: string): void {
  const command =
    process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  try {
    const child = spawn(command, [address], { stdio: 'ignore', detached: true });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // No opener: the person opens the printed address.
  }
}

/** `planfence logout`: ends the stored session at the service and forgets it. */
export async function browserLogout(url: string): Promise<{ ended: boolean; stored: boolean }> {
  const base = url.replace(/\/+$/, '');
  const credential = readCredential(base);
  if (!credential) return { ended: false, stored: false };
  let ended = false;
  try {
    const response = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${credential.token}` },
      body: JSON.stringify({ query: 'mutation { logout }' }),
    });
    const body = (await response.json()) as { data?: { logout?: boolean } };
    ended = body.data?.logout === true;
  } catch {
    // The service is unreachable or the session had ended: forgotten here all the same.
  }
  forgetCredential(base);
  return { ended, stored: true };
}
