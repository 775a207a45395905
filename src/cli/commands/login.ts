/**
 * `planfence login`: a person signs in with the organisation's provider through the browser
 * (docs/design.md §19, login-browser.ts), or a CI job exchanges its OIDC token for a
 * planfence token (§12, docs/identity.md). `planfence logout` ends the person's session.
 */
import { parseArgs } from 'node:util';
import { exchangeOidcToken, githubActionsIdToken } from '../../client/identity.js';
import { readInput, UsageError } from '../command.js';
import { browserLogin, browserLogout, offeredLogins } from './login-browser.js';
import { credentialsFile } from './login-store.js';

export const LOGIN_HELP = `Usage: planfence login [--provider N] [--no-browser] [--print] [--url URL] [--json]
       planfence login --logout [--url URL]
       planfence login (--oidc-token-file PATH | --github-actions [--audience AUD]) [--url URL] [--json]

  A person: opens the browser at the service's sign-in (the organisation's provider,
  authorization code + PKCE, back to a loopback address of this command) and stores the
  session's token in ${'$'}XDG_CONFIG_HOME/planfence/credentials.json (mode 0600), for the
  session's lifetime.
  --provider N             the service's Nth sign-in provider (default: the first)
  --no-browser             only print the address to open
  --print                  also print the token, e.g. export PLANFENCE_TOKEN=$(planfence login --print)
  --logout                 ends the stored session at the service and forgets its token

  A CI job: exchanges the CI job's OIDC token for a short-lived planfence token and prints it
  (only the token, unless --json), for example:
    export PLANFENCE_TOKEN=$(planfence login --github-actions --audience planfence)
  --oidc-token-file PATH   a file holding the JWT (GitLab: a file written from $PLANFENCE_JWT)
  --github-actions         request the JWT from GitHub Actions (needs permissions: id-token: write)
  --audience AUD           the audience to request from GitHub Actions (default: planfence)`;

export async function login(
  argv: string[],
  out: (text: string) => void,
  /** Where the address to open goes (the terminal's stderr). */
  tell: (text: string) => void = (text) => process.stderr.write(`${text}\n`),
): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    allowPositionals: false,
    options: {
      'oidc-token-file': { type: 'string' },
      'github-actions': { type: 'boolean' },
      audience: { type: 'string' },
      url: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean' },
      provider: { type: 'string' },
      'no-browser': { type: 'boolean' },
      print: { type: 'boolean' },
      logout: { type: 'boolean' },
    },
  });
  if (values.help) {
    out(LOGIN_HELP);
    return 0;
  }
  if (values.logout) return logout(values.url ? ['--url', values.url] : [], out);
  const file = values['oidc-token-file'];
  if (file && values['github-actions']) {
    throw new UsageError('login takes one of --oidc-token-file PATH and --github-actions');
  }
  if (!file && !values['github-actions']) {
    const provider = values.provider === undefined ? undefined : Number(values.provider);
    if (provider !== undefined && !(Number.isInteger(provider) && provider >= 0))
      throw new UsageError('--provider must be a number from 0');
    const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
    const offered = await offeredLogins(url);
    if (!offered.length)
      throw new UsageError(
        `${url} offers no sign-in for people (PLANFENCE_OIDC_CONFIG logins); a CI job: login needs exactly one of --oidc-token-file PATH and --github-actions`,
      );
    if (provider !== undefined && provider >= offered.length)
      throw new UsageError(
        `--provider: ${url} offers ${offered.length} sign-in provider(s), from 0`,
      );
    const signedIn = await browserLogin({
      url,
      provider,
      noBrowser: values['no-browser'],
      tell,
    });
    if (values.json)
      out(
        JSON.stringify(
          {
            url: signedIn.url,
            principal: signedIn.principal,
            expiresAt: signedIn.expiresAt,
            stored: credentialsFile(),
          },
          null,
          2,
        ),
      );
    else if (values.print) out(signedIn.token);
    else
      out(
        `Signed in to ${signedIn.url} as ${signedIn.principal} until ${signedIn.expiresAt} (token stored in ${credentialsFile()})`,
      );
    return 0;
  }
  let jwt: string;
  if (file) {
    jwt = readInput(file, 'OIDC token file').trim();
  } else {
    jwt = await githubActionsIdToken(values.audience ?? 'planfence');
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const exchanged = await exchangeOidcToken({ url }, jwt);
  out(values.json ? JSON.stringify(exchanged, null, 2) : exchanged.token);
  return 0;
}

/** `planfence login --logout` (and `planfence logout`): ends the stored session of the service at --url and forgets its token. */
export async function logout(argv: string[], out: (text: string) => void): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    allowPositionals: false,
    options: { url: { type: 'string' }, help: { type: 'boolean' } },
  });
  if (values.help) {
    out(LOGIN_HELP);
    return 0;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const { ended, stored } = await browserLogout(url);
  out(
    !stored
      ? `Not signed in to ${url}.`
      : ended
        ? `Signed out of ${url}.`
        : `Forgot the stored token of ${url} (its session had already ended).`,
  );
  return 0;
}
