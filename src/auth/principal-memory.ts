import type { TokenCheck } from '../database/database.js';
import type { Principal } from '../model/principal.entity.js';

/** At most this many principals are kept in memory (the least recently authenticated go first). */
const REMEMBERED_PRINCIPALS = 10_000;

/**
 * The principals that tokens named, by token hash, kept in memory so that an authenticated
 * request reads nothing from the database (on SQLite that read would also wait for the
 * group commit in progress). Exact, not a time-limited cache:
 * - every change of a principal's access (revocation, rotation, an OIDC renewal, the admin
 *   token restored) raises a PrincipalChanges signal that this instance hears right after
 *   the commit, before any later request is served; `forget` then drops the principal;
 * - a lookup that was under way when a change was heard is not kept (`changes` moved), so a
 *   row read before the commit never outlives it;
 * - expiry is judged on every request by the service clock, cached or not.
 * On SQLite one process owns the database file and so hears every change at its commit: a
 * remembered principal is exact. On PostgreSQL another instance's change arrives by NOTIFY
 * over a connection that can be lost for a while, so a remembered principal is only a
 * candidate (`unchecked`): it serves just the operations whose decision checks the token in
 * its own transaction (`@TokenCheckedInDecision`, Decision.token); every other request reads
 * the row.
 */
export class PrincipalMemory {
  private readonly byHash = new Map<string, Principal>();
  /** Signals heard so far: a lookup started before one of them may have read a stale row. */
  changes = 0;

  get(tokenHash: string): Principal | undefined {
    const principal = this.byHash.get(tokenHash);
    if (principal) {
      // Most recently used last: the first entry is the one to evict.
      this.byHash.delete(tokenHash);
      this.byHash.set(tokenHash, principal);
    }
    return principal;
  }

  keep(tokenHash: string, principal: Principal, changesBefore: number): void {
    if (changesBefore !== this.changes) return;
    this.byHash.set(tokenHash, principal);
    if (this.byHash.size > REMEMBERED_PRINCIPALS)
      this.byHash.delete(this.byHash.keys().next().value as string);
  }

  forget(name: string): void {
    this.changes++;
    for (const [hash, principal] of this.byHash)
      if (principal.name === name) this.byHash.delete(hash);
  }
}

/** The principals handed out from memory on PostgreSQL, with the check their decision must make. */
const pendingChecks = new WeakMap<Principal, TokenCheck>();

/** This request's own copy of a remembered principal, whose token its decision must check. */
export function unchecked(principal: Principal): Principal {
  const copy = Object.assign(
    Object.create(Object.getPrototypeOf(principal) as object) as Principal,
    principal,
  );
  pendingChecks.set(copy, { name: principal.name, tokenHash: principal.tokenHash });
  return copy;
}

/**
 * The token check the decision of a request by `principal` must make in its transaction
 * (Decision.token): set when the principal came from memory on PostgreSQL, undefined when it
 * was read from the database for this request (or on SQLite).
 */
export function tokenCheckOf(principal: Principal): TokenCheck | undefined {
  return pendingChecks.get(principal);
}
