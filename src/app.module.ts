import { type DynamicModule, Global, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { GraphQLModule } from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from './audit/audit.module.js';
import { AuthModule } from './auth/auth.module.js';
import { Clock } from './common/clock.js';
import { formatGraphQLErrors, PassThroughGqlFilter } from './common/error-formatter.js';
import { ConfigModule } from './config/config.module.js';
import type { Config } from './config/config.js';
import { dataSourceOptions } from './database/data-source.js';
import { DatabaseModule } from './database/database.module.js';
import { EnvironmentsModule } from './environments/environments.module.js';
import { HealthController } from './health/health.controller.js';
import { LeasesModule } from './leases/leases.module.js';
import { PlansModule } from './plans/plans.module.js';

@Global()
@Module({})
class ClockModule {
  static forRoot(clock: Clock): DynamicModule {
    return {
      module: ClockModule,
      providers: [{ provide: Clock, useValue: clock }],
      exports: [Clock],
    };
  }
}

@Module({})
export class AppModule {
  static forRoot(config: Config, clock: Clock): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        ClockModule.forRoot(clock),
        TypeOrmModule.forRoot(dataSourceOptions(config)),
        DatabaseModule,
        GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: MercuriusDriver,
          autoSchemaFile: true,
          sortSchema: true,
          graphiql: true,
          path: '/graphql',
          errorFormatter: formatGraphQLErrors,
        }),
        AuthModule,
        AuditModule,
        EnvironmentsModule,
        LeasesModule,
        PlansModule,
      ],
      controllers: [HealthController],
      providers: [{ provide: APP_FILTER, useClass: PassThroughGqlFilter }],
    };
  }
}
