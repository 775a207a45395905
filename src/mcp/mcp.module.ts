import { Module } from '@nestjs/common';
import { ChecksModule } from '../checks/checks.module.js';
import { AccessModule } from '../access/access.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { DeploymentsModule } from '../deployments/deployments.module.js';
import { EventsModule } from '../events/events.module.js';
import { EnvironmentsModule } from '../environments/environments.module.js';
import { LeasesModule } from '../leases/leases.module.js';
import { PlansModule } from '../plans/plans.module.js';
import { QuotasModule } from '../quotas/quotas.module.js';
import { McpController } from './mcp.controller.js';
import { McpGate } from './mcp.gate.js';

/** Agents over MCP (DESIGN §14): POST /mcp and its tools. */
@Module({
  imports: [
    AccessModule,
    AuthModule,
    QuotasModule,
    EnvironmentsModule,
    LeasesModule,
    PlansModule,
    ChecksModule,
    DeploymentsModule,
    EventsModule,
  ],
  controllers: [McpController],
  // McpTools is built by the controller on the first POST /mcp, with this module's providers.
  providers: [McpGate],
})
export class McpModule {}
