import { Module } from '@nestjs/common';
import { PgListener } from './pg-listener.js';

/** The instance's one LISTEN connection to PostgreSQL (none on SQLite), for every module that hears other instances. */
@Module({ providers: [PgListener], exports: [PgListener] })
export class PgListenerModule {}
