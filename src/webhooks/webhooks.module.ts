import { Module } from '@nestjs/common';
import { OutboxModule } from '../outbox/outbox.module.js';
import { DeliveriesRepository } from './deliveries.repository.js';
import { WebhookDispatcher } from './dispatcher.js';
import { WebhooksResolver } from './webhooks.resolver.js';
import { WebhooksService } from './webhooks.service.js';

@Module({
  imports: [OutboxModule],
  providers: [WebhooksService, WebhooksResolver, DeliveriesRepository, WebhookDispatcher],
})
export class WebhooksModule {}
