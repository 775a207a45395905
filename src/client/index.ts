/** The planfence client: `import { PlanfenceClient } from 'planfence/client'`. */
export * from './client.js';
export * from './errors.js';
export * from './deployments.js';
export * from './checks.js';
export * from './identity.js';
export * from './webhooks.js';
export * from './subscriptions.js';
