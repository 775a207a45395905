import { type DynamicModule, Global, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { GraphQLModule } from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AccessModule } from './access/access.module.js';
import { AuditModule } from './audit/audit.module.js';
import { Clock, DatabaseClock, SystemClock } from './common/clock.js';
import { createErrorFormatter, PassThroughGqlFilter } from './common/error-formatter.js';
import { ConfigModule } from './config/config.module.js';
import type { Config } from './config/config.js';
import { dataSourceOptions } from './database/data-source.js';
import { DatabaseModule } from './database/database.module.js';
import { DeploymentsModule } from './deployments/deployments.module.js';
import { ChecksModule } from './checks/checks.module.js';
import { EnvironmentsModule } from './environments/environments.module.js';
import { EventsModule } from './events/events.module.js';
import { subscriptionOptions } from './events/subscription-options.js';
import { DashboardController } from './dashboard/dashboard.controller.js';
import { HealthController } from './health/health.controller.js';
import { IdentityModule } from './identity/identity.module.js';
import { LeasesModule } from './leases/leases.module.js';
import { McpModule } from './mcp/mcp.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { OutboxModule } from './outbox/outbox.module.js';
import { PlansModule } from './plans/plans.module.js';
import { PoliciesModule } from './policies/policies.module.js';
import { QuotasModule } from './quotas/quotas.module.js';
import { RetentionModule } from './retention/retention.module.js';
import { SessionsModule } from './sessions/sessions.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';
import { SlackModule } from './slack/slack.module.js';

/** The given clock (tests), else the database's on PostgreSQL, else this process's. */
@Global()
@Module({})
class ClockModule {
  static forRoot(config: Config, clock: Clock | undefined): DynamicModule {
    const provider = clock
      ? { provide: Clock, useValue: clock }
      : {
          provide: Clock,
          inject: [DataSource],
          useFactory: (dataSource: DataSource) =>
            config.database.kind === 'postgres'
              ? new DatabaseClock(dataSource.manager)
              : new SystemClock(),
        };
    return { module: ClockModule, providers: [provider], exports: [Clock] };
  }
}

@Module({})
export class AppModule {
  static forRoot(config: Config, clock?: Clock): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        ClockModule.forRoot(config, clock),
        TypeOrmModule.forRoot(dataSourceOptions(config)),
        DatabaseModule,
        EventsModule,
        OutboxModule,
        MetricsModule,
        GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: MercuriusDriver,
          autoSchemaFile: true,
          sortSchema: true,
          // GraphiQL loads its scripts from a public CDN: off unless PLANFENCE_GRAPHIQL=on.
          graphiql: config.limits.graphiql,
          path: '/graphql',
          // The parser gives up past this many tokens: a huge document costs a bounded parse.
          graphql: { parseOptions: { maxTokens: config.limits.maxTokens } },
          errorFormatter: createErrorFormatter({
            suggestionsWithoutToken: config.limits.introspection === 'open',
          }) as MercuriusDriverConfig['errorFormatter'],
          subscription: subscriptionOptions(),
        }),
        AccessModule,
        QuotasModule,
        AuditModule,
        PoliciesModule,
        EnvironmentsModule,
        LeasesModule,
        PlansModule,
        RetentionModule,
        DeploymentsModule,
        ChecksModule,
        IdentityModule,
        SessionsModule,
        WebhooksModule,
        McpModule,
        SlackModule,
      ],
      controllers: [HealthController, DashboardController],
      providers: [{ provide: APP_FILTER, useClass: PassThroughGqlFilter }],
    };
  }
}
