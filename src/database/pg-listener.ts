import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';

/** Called with each notification's payload, in the order PostgreSQL delivered them. */
export type ChannelHandler = (payload: string) => void;

/** How long a lost listener waits before it connects again. */
const RECONNECT_MS = 1000;

/** Attempts of the first LISTEN at start (half a reconnect period apart) before the start fails. */
const FIRST_LISTEN_ATTEMPTS = 10;

/**
 * The instance's one LISTEN connection to PostgreSQL (none on SQLite), shared by everything
 * that hears other instances: principal changes and subscription events.
 *
 * PostgreSQL delivers a notification only when the transaction that sent it commits, and
 * notifications of different transactions in the order those transactions committed
 * (https://www.postgresql.org/docs/current/sql-notify.html). Handlers run synchronously in
 * that order. While the connection is lost, notifications are missed (PostgreSQL keeps none
 * for a session that is not listening); the listener connects again every second and, when
 * it is back, says so in the log and tells `onRecovery` callbacks.
 */
@Injectable()
export class PgListener implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(PgListener.name);
  private readonly handlers = new Map<string, ChannelHandler>();
  private readonly recoveries = new EventEmitter().setMaxListeners(0);
  private client: pg.Client | null = null;
  private reconnect: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Whether the connection was lost since it last listened (the next connect reports a gap). */
  private lost = false;

  constructor(@Inject(CONFIG) private readonly config: Config) {}

  get enabled(): boolean {
    return this.config.database.kind === 'postgres';
  }

  /** Whether the connection is listening now (tests and health). */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Routes notifications of `channel` (a plain lowercase identifier) to `handler`; before bootstrap. */
  on(channel: string, handler: ChannelHandler): void {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    if (this.handlers.has(channel)) throw new Error(`channel ${channel} already has a handler`);
    this.handlers.set(channel, handler);
  }

  /**
   * Calls `callback` each time the connection listens again after it was lost: what was
   * committed meanwhile was not heard here. Returns the function that stops the calls.
   */
  onRecovery(callback: () => void): () => void {
    this.recoveries.on('recovered', callback);
    return () => this.recoveries.off('recovered', callback);
  }

  /**
   * The instance starts only once it listens: a subscriber it admits hears every event
   * committed from then on. A failed first attempt is tried again for a few seconds.
   */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.enabled) return;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.listen();
      } catch (error) {
        if (attempt >= FIRST_LISTEN_ATTEMPTS) {
          throw new Error(`cannot LISTEN on the database: ${(error as Error).message}`);
        }
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS / 2));
      }
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.reconnect) clearTimeout(this.reconnect);
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }

  /** Ends the connection as a network failure would (tests of the reconnect); resolves once it is down. */
  async dropConnection(): Promise<void> {
    const client = this.client;
    if (!client) return;
    const ended = new Promise((resolve) => client.once('end', resolve));
    await client.query('SELECT pg_terminate_backend(pg_backend_pid())').catch(() => undefined);
    await ended;
  }

  /** Connects and LISTENs on every channel; throws when it cannot. */
  private async listen(): Promise<void> {
    if (this.stopped) return;
    // pg loads with the first connection: a service on SQLite never holds it.
    const { default: Pg } = await import('pg');
    const client = new Pg.Client({
      connectionString: (this.config.database as { url: string }).url,
    });
    const failedWhileConnecting = () => undefined;
    client.on('error', failedWhileConnecting);
    client.on('notification', (message) => {
      const handler = this.handlers.get(message.channel);
      if (!handler || message.payload === undefined) return;
      try {
        handler(message.payload);
      } catch (error) {
        this.logger.error(`notification on ${message.channel} failed: ${(error as Error).message}`);
      }
    });
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    client.off('error', failedWhileConnecting);
    client.on('error', (error) => {
      this.logger.warn(`the LISTEN connection failed: ${error.message}`);
      this.retry(client);
    });
    client.on('end', () => this.retry(client));
    this.client = client;
    if (this.lost) {
      this.lost = false;
      this.logger.warn(
        'the LISTEN connection is back: subscription events and principal changes committed ' +
          'while it was lost were missed on this instance; its open subscriptions are ' +
          'completed (clients resume them with `after`) and its sockets re-checked',
      );
      this.recoveries.emit('recovered');
    }
  }

  /** After a loss: tries again every RECONNECT_MS until it listens. */
  private relisten(): void {
    this.listen().catch((error: unknown) => {
      this.logger.warn(`cannot LISTEN yet: ${(error as Error).message}`);
      this.reconnect = setTimeout(() => {
        this.reconnect = null;
        this.relisten();
      }, RECONNECT_MS);
      this.reconnect.unref();
    });
  }

  private retry(client: pg.Client): void {
    if (this.stopped || this.client !== client) return;
    this.logger.warn('the LISTEN connection is lost: reconnecting');
    this.client = null;
    this.lost = true;
    client.end().catch(() => undefined);
    this.reconnect = setTimeout(() => {
      this.reconnect = null;
      this.relisten();
    }, RECONNECT_MS);
    this.reconnect.unref();
  }
}
