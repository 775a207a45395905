import { EventEmitter } from 'node:events';
import { Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { PgListener } from '../database/pg-listener.js';

/** The PostgreSQL channel on which every instance hears that a principal's access changed. */
export const PRINCIPAL_CHANNEL = 'planfence_principal_changed';

/**
 * "The access of principal X changed" (revoked, and later expired or rotated): one signal
 * keyed on the principal's name, raised inside the transaction that made the change and
 * heard after its commit, never for a rollback.
 *
 * On SQLite (one process per database file) the signal stays in this process. On
 * PostgreSQL the transaction also runs `pg_notify`, which PostgreSQL delivers at commit to
 * every instance listening on the database (PgListener), this one included. A listener that
 * lost its connection misses signals until it reconnects; the sockets' periodic re-check is
 * the backstop for that window.
 */
@Injectable()
export class PrincipalChanges {
  private readonly local = new EventEmitter().setMaxListeners(0);

  constructor(
    private readonly db: Database,
    listener: PgListener,
  ) {
    if (listener.enabled) {
      listener.on(PRINCIPAL_CHANNEL, (name) => this.local.emit('changed', name));
    }
  }

  /** Marks `name`'s access as changed by the transaction of `m`. */
  changed(m: Transaction, name: string): void {
    if (this.db.dialect === 'postgres') this.db.notify(m, PRINCIPAL_CHANNEL, name);
    this.db.afterCommit(m, () => this.local.emit('changed', name));
  }

  /** Calls `listener` with the name of each principal whose access changed. */
  onChange(listener: (name: string) => void): () => void {
    this.local.on('changed', listener);
    return () => this.local.off('changed', listener);
  }
}
