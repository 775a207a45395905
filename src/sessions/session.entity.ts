import { Field, GraphQLISODateTime, ID, ObjectType } from '@nestjs/graphql';

/** Every session secret starts with this (a bearer token that is a session, not a principal's token). */
export const SESSION_PREFIX = 'pfs_';

/** The cookie that carries a console session's secret. */
export const SESSION_COOKIE = 'planfence_session';

/** console: a browser's cookie; cli: the bearer token `planfence login` stores. */
export type SessionKind = 'console' | 'cli';

/** A row of `sessions` (migration 1766200000000); its secret is stored only as a hash. */
export interface SessionRow {
  id: string;
  principal: string;
  kind: SessionKind;
  createdAt: number;
  lastSeenAt: number;
  /** The absolute end (sessionHours after the sign-in). */
  expiresAt: number;
  idleMinutes: number;
  endedAt: number | null;
}

/** A person's sign-in (DESIGN §19). */
@ObjectType('Session', { description: "A person's sign-in (DESIGN §19)." })
export class Session {
  @Field(() => ID)
  id: string;

  /** Resolved to `principal` by SessionsResolver. */
  principalName: string;

  @Field(() => String, {
    nullable: true,
    description:
      "Send it as header x-planfence-csrf with every change made with this session's cookie (DESIGN R42). Null except in mySession.",
  })
  csrfToken: string | null;

  @Field(() => GraphQLISODateTime)
  createdAt: Date;

  @Field(() => GraphQLISODateTime)
  lastSeenAt: Date;

  /** The earlier of the absolute end and the idle end as of lastSeenAt. */
  @Field(() => GraphQLISODateTime)
  expiresAt: Date;
}
