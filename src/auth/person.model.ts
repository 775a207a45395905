import { Field, ObjectType } from '@nestjs/graphql';
import type { EntityManager } from 'typeorm';
import { selectLater } from '../database/sql.js';

/**
 * A person who signed in (DESIGN R40, R43): the provider's issuer and subject name them
 * (stable across renames); email and name are as the provider last gave them.
 */
@ObjectType()
export class Person {
  @Field()
  issuer: string;

  @Field()
  subject: string;

  @Field(() => String, { nullable: true })
  email: string | null;

  @Field(() => String, { nullable: true })
  name: string | null;
}

/** The person a principal row records, or null for a principal that is no person. */
export function personOf(row: {
  personIssuer: string | null;
  personSubject: string | null;
  personEmail: string | null;
  personName: string | null;
}): Person | null {
  if (!row.personIssuer || !row.personSubject) return null;
  return {
    issuer: row.personIssuer,
    subject: row.personSubject,
    email: row.personEmail,
    name: row.personName,
  };
}

/** How the audit log names a person: `Alice A <alice@example.com> (subject u-1 at https://idp)`. */
export function describePerson(person: Person): string {
  const who = [person.name, person.email ? `<${person.email}>` : null].filter(Boolean).join(' ');
  return `${who ? `${who} ` : ''}(subject ${person.subject} at ${person.issuer})`;
}

/** Decisions whose audit event names the person behind the actor (R43); break-glass is an APPROVE_PLAN. */
const PERSON_DECISIONS = new Set(['APPROVE_PLAN', 'REJECT_PLAN', 'RECONCILE_DEPLOYMENT']);

/**
 * R43: the person behind the actor of a decision that names one (null for other decisions),
 * read in the decision's transaction. Started before the decision's own statements, it is
 * sent with them (PostgreSQL: no round trip of its own); awaited once one of them was.
 */
export function personLater(
  m: EntityManager,
  action: string,
  actor: string,
): Promise<Person | null> | null {
  if (!PERSON_DECISIONS.has(action)) return null;
  const read = selectLater<{
    person_issuer: string | null;
    person_subject: string | null;
    person_email: string | null;
    person_name: string | null;
  }>(
    m,
    'SELECT person_issuer, person_subject, person_email, person_name FROM principals WHERE name = :actor',
    { actor },
  ).then(([row]) =>
    row
      ? personOf({
          personIssuer: row.person_issuer,
          personSubject: row.person_subject,
          personEmail: row.person_email,
          personName: row.person_name,
        })
      : null,
  );
  // A transaction that fails first rejects it; nobody awaits it then.
  read.catch(() => undefined);
  return read;
}

/**
 * R43: the audit detail of a decision by a signed-in person, with the person appended
 * (`...; person: Alice A <alice@example.com> (subject u-1 at https://idp)`); unchanged for
 * other decisions and for actors that are no person.
 */
export async function withPerson(
  detail: string | undefined,
  person: Promise<Person | null> | null,
): Promise<string | undefined> {
  const found = person ? await person : null;
  if (!found) return detail;
  return `${detail ? `${detail}; ` : ''}person: ${describePerson(found)}`;
}
