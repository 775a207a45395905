import type { Principal } from './principal.entity.js';

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
 * Only on SQLite, where one process owns the database file and so hears every change at its
 * commit. On PostgreSQL another instance's change arrives by NOTIFY over a connection that
 * can be lost for a while, so every request reads the row there.
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
