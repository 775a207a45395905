import { Module } from '@nestjs/common';
import { Outbox } from './outbox.service.js';

@Module({ providers: [Outbox], exports: [Outbox] })
export class OutboxModule {}
