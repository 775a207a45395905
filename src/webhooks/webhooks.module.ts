import { Module } from '@nestjs/common';
import { WebhookDispatcher } from './dispatcher.js';
import { WebhooksResolver } from './webhooks.resolver.js';
import { WebhooksService } from './webhooks.service.js';

@Module({ providers: [WebhooksService, WebhooksResolver, WebhookDispatcher] })
export class WebhooksModule {}
