import { EventEmitter } from 'node:events';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import pg from 'pg';
import type { EntityManager } from 'typeorm';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, select } from '../database/database.js';

/** The PostgreSQL channel on which every instance hears that a principal's access changed. */
export const PRINCIPAL_CHANNEL = 'planfence_principal_changed';

/**
 * "The access of principal X changed" (revoked, and later expired or rotated): one signal
 * keyed on the principal's name, raised inside the transaction that made the change and
 * heard after its commit, never for a rollback.
 *
 * On SQLite (one process per database file) the signal stays in this process. On
 * PostgreSQL the transaction also runs `pg_notify`, which PostgreSQL delivers at commit to
 * every instance listening on the database, this one included. A listener that lost its
 * connection misses signals until it reconnects; the sockets' periodic re-check is the
 * backstop for that window.
 */
@Injectable()
export class PrincipalChanges implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(PrincipalChanges.name);
  private readonly local = new EventEmitter().setMaxListeners(0);
  private listener: pg.Client | null = null;
  private reconnect: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly db: Database,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /** Marks `name`'s access as changed by the transaction of `m`. */
  async changed(m: EntityManager, name: string): Promise<void> {
    if (this.db.dialect === 'postgres') {
      await select(m, 'SELECT pg_notify(:channel, :name)', { channel: PRINCIPAL_CHANNEL, name });
    }
    this.db.afterCommit(m, () => this.local.emit('changed', name));
  }

  /** Calls `listener` with the name of each principal whose access changed. */
  onChange(listener: (name: string) => void): () => void {
    this.local.on('changed', listener);
    return () => this.local.off('changed', listener);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.database.kind === 'postgres') await this.listen();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.reconnect) clearTimeout(this.reconnect);
    await this.listener?.end().catch(() => undefined);
    this.listener = null;
  }

  private async listen(): Promise<void> {
    if (this.config.database.kind !== 'postgres' || this.stopped) return;
    const client = new pg.Client({ connectionString: this.config.database.url });
    client.on('notification', (message) => {
      if (message.channel === PRINCIPAL_CHANNEL && message.payload) {
        this.local.emit('changed', message.payload);
      }
    });
    client.on('error', (error) => {
      this.logger.warn(`principal change listener lost its connection: ${error.message}`);
      this.retry(client);
    });
    client.on('end', () => this.retry(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${PRINCIPAL_CHANNEL}`);
      this.listener = client;
    } catch (error) {
      this.logger.warn(`cannot listen for principal changes: ${(error as Error).message}`);
      this.retry(client);
    }
  }

  private retry(client: pg.Client): void {
    if (this.stopped || this.reconnect || (this.listener && this.listener !== client)) return;
    this.listener = null;
    client.end().catch(() => undefined);
    this.reconnect = setTimeout(() => {
      this.reconnect = null;
      void this.listen();
    }, 1000);
    this.reconnect.unref();
  }
}
