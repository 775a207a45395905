import { type Command, integer, table } from '../command.js';

const PRINCIPAL = 'name role createdAt revokedAt groups environments expiresAt';

interface Principal {
  name: string;
  role: string;
  createdAt: string;
  revokedAt: string | null;
  groups: string[];
  environments: string[] | null;
  expiresAt: string | null;
}
interface Issued {
  principal: Principal;
  token: string;
}

/** `--environments a,b --environments c` → [a, b, c]; undefined when not given. */
function list(values: string[] | undefined): string[] | undefined {
  if (!values?.length) return undefined;
  return values
    .flatMap((value) => value.split(','))
    .map((value) => value.trim())
    .filter(Boolean);
}

const scope = (p: Principal) =>
  [
    p.groups.length ? ` in ${p.groups.join(', ')}` : '',
    p.environments ? ` for ${p.environments.join(', ')}` : '',
    p.expiresAt ? `, expires ${p.expiresAt}` : '',
  ].join('');

/** planfence token issue NAME ROLE [--group G ...] [--environments P,...] [--expires-in SECONDS] */
export const issueToken: Command = async ({ client, rest, values, print, need }) => {
  need(
    2,
    'token issue NAME ROLE [--group GROUP ...] [--environments PATTERN,...] [--expires-in SECONDS]',
  );
  const { issueToken: issued } = await client.request<{ issueToken: Issued }>(
    `mutation($name: String!, $role: Role!, $groups: [String!], $environments: [String!], $expiresInSeconds: Int) {
       issueToken(name: $name, role: $role, groups: $groups, environments: $environments, expiresInSeconds: $expiresInSeconds) {
         token principal { ${PRINCIPAL} } } }`,
    {
      name: rest[0],
      role: rest[1].toUpperCase(),
      groups: values.group?.length ? values.group : undefined,
      environments: list(values.environments),
      expiresInSeconds:
        values['expires-in'] === undefined
          ? undefined
          : integer(values['expires-in'], '--expires-in'),
    },
  );
  print(
    issued,
    () =>
      `issued a ${issued.principal.role} token to ${issued.principal.name}${scope(issued.principal)} (shown once):\n${issued.token}`,
  );
  return 0;
};

/** planfence token rotate NAME: a new secret, the old one stops at once. */
export const rotateToken: Command = async ({ client, rest, print, need }) => {
  need(1, 'token rotate NAME');
  const { rotateToken: issued } = await client.request<{ rotateToken: Issued }>(
    `mutation($name: String!) { rotateToken(name: $name) { token principal { ${PRINCIPAL} } } }`,
    { name: rest[0] },
  );
  print(
    issued,
    () =>
      `a new ${issued.principal.role} token for ${issued.principal.name}; the old one no longer works (shown once):\n${issued.token}`,
  );
  return 0;
};

/** planfence token list: every principal, with its role, groups, scope and state. */
export const listTokens: Command = async ({ client, print }) => {
  const { principals } = await client.request<{ principals: Principal[] }>(
    `{ principals { ${PRINCIPAL} } }`,
  );
  print(principals, () =>
    table(
      principals.map((p) => ({
        name: p.name,
        role: p.role,
        groups: p.groups.join(',') || null,
        environments: p.environments?.join(',') ?? null,
        expiresAt: p.expiresAt,
        revokedAt: p.revokedAt,
      })),
    ),
  );
  return 0;
};

/** planfence token groups NAME --group G ...: replaces the principal's groups. */
export const setTokenGroups: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'token groups NAME [--group GROUP ...]');
  const principal = await client.setPrincipalGroups(rest[0], values.group ?? []);
  print(principal, () => `${principal.name} is in ${principal.groups.join(', ') || 'no group'}`);
  return 0;
};

/** planfence token revoke */
export const revokeToken: Command = async ({ client, rest, print, need }) => {
  need(1, 'token revoke NAME');
  const principal = await client.revokeToken(rest[0]);
  print(principal, () => `revoked the token of ${principal.name} at ${principal.revokedAt}`);
  return 0;
};
