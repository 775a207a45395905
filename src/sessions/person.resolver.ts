import { Parent, ResolveField, Resolver } from '@nestjs/graphql';
import { Person, personOf } from '../auth/person.model.js';
import { Database, select } from '../database/database.js';
import { Approval } from '../plans/approval.model.js';

interface PersonRow {
  person_issuer: string | null;
  person_subject: string | null;
  person_email: string | null;
  person_name: string | null;
}

/**
 * R43: who approved, as a person. An approval names its approver (a principal); a principal
 * made by a sign-in records the person (issuer, subject, email, name), and a person is one
 * principal, so the approver's person is the approval's.
 */
@Resolver(() => Approval)
export class PersonResolver {
  constructor(private readonly db: Database) {}

  @ResolveField('person', () => Person, {
    nullable: true,
    description: 'The person, where the approver signed in (DESIGN R43).',
  })
  async person(@Parent() approval: Approval): Promise<Person | null> {
    const [row] = await this.db.read((m) =>
      select<PersonRow>(
        m,
        'SELECT person_issuer, person_subject, person_email, person_name FROM principals WHERE name = :name',
        { name: approval.approver },
      ),
    );
    return row
      ? personOf({
          personIssuer: row.person_issuer,
          personSubject: row.person_subject,
          personEmail: row.person_email,
          personName: row.person_name,
        })
      : null;
  }
}
