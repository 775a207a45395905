import { type Command } from '../command.js';

/** planfence token issue NAME ROLE [--group G ...] */
export const issueToken: Command = async ({ client, rest, values, print, need }) => {
  need(2, 'token issue NAME ROLE [--group GROUP ...]');
  const role = rest[1].toUpperCase() as never;
  const issued = values.group?.length
    ? await client.issueTokenWithGroups(rest[0], role, values.group)
    : await client.issueToken(rest[0], role);
  const groups = values.group?.length ? ` in ${values.group.join(', ')}` : '';
  print(
    issued,
    () =>
      `issued a ${issued.principal.role} token to ${issued.principal.name}${groups} (shown once):\n${issued.token}`,
  );
  return 0;
};

/** planfence token revoke */
export const revokeToken: Command = async ({ client, rest, print, need }) => {
  need(1, 'token revoke NAME');
  const principal = await client.revokeToken(rest[0]);
  print(principal, () => `revoked the token of ${principal.name} at ${principal.revokedAt}`);
  return 0;
};
