import { Module } from '@nestjs/common';
import { OutboxModule } from '../outbox/outbox.module.js';
import { DeliveryClaims } from './delivery-claims.js';
import { WebhookDispatcher } from './dispatcher.js';
import { WebhooksResolver } from './webhooks.resolver.js';
import { WebhooksService } from './webhooks.service.js';

@Module({
  imports: [OutboxModule],
  providers: [WebhooksService, WebhooksResolver, DeliveryClaims, WebhookDispatcher],
})
export class WebhooksModule {}
