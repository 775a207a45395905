import { Module } from '@nestjs/common';
import { AccessModule } from '../access/access.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ChecksModule } from '../checks/checks.module.js';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { OutboxModule } from '../outbox/outbox.module.js';
import { PlansModule } from '../plans/plans.module.js';
import { SlackCommands } from './slack-commands.js';
import { SlackInteractions } from './slack-interactions.js';
import { SlackLinks } from './slack-links.js';
import { SlackMessages } from './slack-messages.service.js';
import { SlackResolver } from './slack.resolver.js';
import { SlackRoutes } from './slack.routes.js';

/** Reviews in Slack (DESIGN §20, R45–R47, docs/slack.md). */
@Module({
  imports: [AccessModule, AuthModule, ChecksModule, DecisionsModule, OutboxModule, PlansModule],
  providers: [
    SlackLinks,
    SlackMessages,
    SlackInteractions,
    SlackCommands,
    SlackRoutes,
    SlackResolver,
  ],
})
export class SlackModule {}
