/** `planfence login`: a planfence token for a CI job's OIDC token (docs/design.md §12, docs/identity.md). */
import { parseArgs } from 'node:util';
import { exchangeOidcToken, githubActionsIdToken } from '../../client/identity.js';
import { readInput, UsageError } from '../command.js';

export const LOGIN_HELP = `Usage: planfence login (--oidc-token-file PATH | --github-actions [--audience AUD]) [--url URL] [--json]

  Exchanges the CI job's OIDC token for a short-lived planfence token and prints it
  (only the token, unless --json), for example:
    export PLANFENCE_TOKEN=$(planfence login --github-actions --audience planfence)
  --oidc-token-file PATH   a file holding the JWT (GitLab: a file written from $PLANFENCE_JWT)
  --github-actions         request the JWT from GitHub Actions (needs permissions: id-token: write)
  --audience AUD           the audience to request from GitHub Actions (default: planfence)`;

export async function login(argv: string[], out: (text: string) => void): Promise<number> {
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
    },
  });
  if (values.help) {
    out(LOGIN_HELP);
    return 0;
  }
  const file = values['oidc-token-file'];
  if (!file === !values['github-actions']) {
    throw new UsageError('login needs exactly one of --oidc-token-file PATH and --github-actions');
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
