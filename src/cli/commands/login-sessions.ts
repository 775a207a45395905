/** `planfence session list|end`: people's sessions, for an ADMIN (docs/design.md §19, R41). */
import { type Command, integer, table } from '../command.js';

interface SessionRow {
  id: string;
  principal: { name: string; person: { email: string | null; name: string | null } | null };
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
}

/** planfence session list [PRINCIPAL] [--first N] */
export const listSessions: Command = async ({ client, rest, values, print }) => {
  const first = values.first ? integer(values.first, '--first') : 50;
  const { sessions } = await client.request<{ sessions: SessionRow[] }>(
    `query($principal: String, $first: Int!) { sessions(principal: $principal, first: $first) {
       id principal { name person { email name } } createdAt lastSeenAt expiresAt } }`,
    { principal: rest[0] ?? null, first },
  );
  print(sessions, () =>
    sessions.length
      ? table(
          sessions.map((s) => ({
            id: s.id,
            principal: s.principal.name,
            person: s.principal.person?.name ?? '',
            since: s.createdAt,
            'last seen': s.lastSeenAt,
            ends: s.expiresAt,
          })),
        )
      : 'no open sessions',
  );
  return 0;
};

/** planfence session end ID */
export const endSession: Command = async ({ client, rest, print, need }) => {
  need(1, 'session end SESSION_ID');
  const { endSession: ended } = await client.request<{ endSession: boolean }>(
    'mutation($id: ID!) { endSession(id: $id) }',
    { id: rest[0] },
  );
  print({ ended }, () => `ended session ${rest[0]}`);
  return 0;
};
