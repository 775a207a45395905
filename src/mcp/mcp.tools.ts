import { randomUUID } from 'node:crypto';
import { ChecksService } from '../checks/checks.service.js';
import { Injectable, type Type } from '@nestjs/common';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Handler } from '../access/access.js';
import type { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { allowsEnvironment } from '../auth/scope.js';
import { Clock } from '../common/clock.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';
import { throughMcp } from '../common/via.js';
import { PlanId } from '../common/ids.js';
import { sha256 } from '../common/hash.js';
import type { AuditEvent } from '../model/audit-event.entity.js';
import type { Deployment } from '../model/deployment.entity.js';
import { DeploymentsResolver } from '../deployments/deployments.resolver.js';
import { DeploymentsService } from '../deployments/deployments.service.js';
import {
  FinishDeploymentInput,
  HeartbeatDeploymentInput,
  StartDeploymentInput,
} from '../deployments/dto/deployment.input.js';
import { EnvironmentsResolver } from '../environments/environments.resolver.js';
import { EnvironmentsService } from '../environments/environments.service.js';
import type { EventKind } from '../events/event-wire.js';
import { EventsService } from '../events/events.service.js';
import {
  AcquireLeaseInput,
  ReleaseLeaseInput,
  RenewLeaseInput,
} from '../leases/dto/lease.inputs.js';
import type { Lease } from '../leases/lease.model.js';
import { EnvironmentArgs } from '../common/environment.args.js';
import { EnqueueLeaseInput } from '../leases/dto/lease-queue.inputs.js';
import { LeaseTicketStatus } from '../model/lease-ticket.entity.js';
import { LeaseQueueResolver } from '../leases/lease-queue.resolver.js';
import { LeaseQueueService } from '../leases/lease-queue.service.js';
import { LeasesResolver } from '../leases/leases.resolver.js';
import { LeasesService } from '../leases/leases.service.js';
import { PlanArgs, SubmitPlanInput } from '../plans/dto/plan.inputs.js';
import { type Plan, PlanStatus } from '../model/plan.entity.js';
import { PlansResolver } from '../plans/plans.resolver.js';
import { PlansService } from '../plans/plans.service.js';
import { reviewUrl } from '../plans/review-url.js';
import { FenceError } from '../fencing/fence.errors.js';
import { LeaseWaitInput, WaitForDecisionInput } from './dto/tool.inputs.js';
import { McpError } from './mcp.errors.js';
import { McpGate, type Operation } from './mcp.gate.js';
import { brief } from './brief.js';
import { afterSubmit } from './next-steps.js';
import { refusal } from './refusals.js';

/** get_plan returns at most this much of a plan's content (`contentTruncated` says when cut). */
export const MAX_TOOL_CONTENT_BYTES = 64 * 1024;

const iso = z.string().describe('ISO 8601 time, by the service clock');
const approvalRule = z.object({
  group: z.string().nullable().describe('null: any reviewer'),
  count: z.number().int().describe('approvals still needed'),
});
/** Plan policies (DESIGN §16) are not stored yet: always []. */
const policyResult = z.object({}).passthrough();
const leaseView = {
  environment: z.string(),
  generation: z.number().int().describe('the fencing token: pass it to every write'),
  holder: z.string(),
  expiresAt: iso,
};
const deploymentView = z.object({
  id: z.string().describe('<environment>#<sequence>'),
  sequence: z
    .number()
    .int()
    .describe('the deployment fencing token for the system that applies the plan'),
  status: z.enum(['IN_PROGRESS', 'SUCCEEDED', 'FAILED', 'UNKNOWN']),
  heartbeatExpiresAt: iso,
});
const planStatus = z.enum([
  'PROPOSED',
  'PUBLISHED',
  'SUPERSEDED',
  'OBSOLETE',
  'REJECTED',
  'EXPIRED',
]);

/** A Terraform plan's counts of resource changes by action (DESIGN §15); its resources stay with get_plan. */
const planCounts = z.object({
  add: z.number().int(),
  change: z.number().int(),
  destroy: z.number().int(),
  replace: z.number().int(),
  read: z.number().int(),
  noop: z.number().int(),
});
type PlanCounts = z.infer<typeof planCounts>;

/** An unknown argument's name as the refusal quotes it: JSON-escaped, and cut if long. */
function quoted(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}

/**
 * The text of an argument no tool declares: `unknown argument "approve"`. The SDK answers
 * the call with its -32602 (invalid params), as for an argument of the wrong type.
 */
const unknownArguments = (issue: { code?: string; keys?: string[] }): string | undefined => {
  if (issue.code !== 'unrecognized_keys' || !issue.keys?.length) return undefined;
  const named = issue.keys.slice(0, 5).map(quoted).join(', ');
  const more = issue.keys.length > 5 ? ` and ${issue.keys.length - 5} more` : '';
  return `unknown argument${issue.keys.length > 1 ? 's' : ''} ${named}${more}`;
};

/**
 * A tool's arguments: exactly those it declares. Any other is refused before the tool runs
 * (a model that invents `approve: true` learns at once that it means nothing), and
 * `tools/list` says so (`additionalProperties: false`).
 */
function strictArguments(shape: z.ZodRawShape) {
  return z.strictObject(shape, { error: unknownArguments });
}

/** The refusal's half of every output schema: `{code, ...extensions}` (R30). */
const REFUSAL_SCHEMA = {
  type: 'object',
  description: "a refusal (isError): its code and that code's extensions, as GraphQL gives them",
  properties: { code: { type: 'string' } },
  required: ['code'],
};

/**
 * R48: a tool's output schema describes both of its outcomes, its output and a refusal, so
 * that a client that checks `structuredContent` against it (the SDK's `callTool`) accepts a
 * refusal too. The JSON Schema `tools/list` gives is `anyOf` [the output, the refusal]; the
 * zod check (the SDK checks each output with it before sending) reads a value with a string
 * `code` as a refusal, anything else as the output.
 */
function outcomes(shape: z.ZodRawShape) {
  const output = z.object(shape);
  const outputSchema: Record<string, unknown> = z.toJSONSchema(output, {
    target: 'draft-7',
    io: 'output',
  });
  // A part of the listed schema, not a document of its own.
  delete outputSchema.$schema;
  return z
    .looseObject({})
    .superRefine((value, ctx) => {
      if (typeof value.code === 'string') return;
      const checked = output.safeParse(value);
      if (!checked.success)
        for (const { message, path } of checked.error.issues)
          ctx.addIssue({ code: 'custom', message, path });
    })
    .meta({ anyOf: [outputSchema, REFUSAL_SCHEMA] });
}

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
const DEPLOY: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: true,
  openWorldHint: false,
};

/** A resolver's method, for the metadata that says who may call it (never called from here). */
function method<T>(type: Type<T>, name: keyof T & string): Handler {
  return Reflect.get(type.prototype as object, name);
}

/** What a tool is: its MCP face and the GraphQL operation whose rules it follows. */
interface ToolSpec {
  name: string;
  title: string;
  description: string;
  /** The resolver method this tool stands for: its `@Roles` decide who sees and may call it. */
  standsFor: Handler;
  annotations: ToolAnnotations;
  /** Its arguments: exactly these (strictArguments). */
  inputSchema: z.ZodRawShape;
  /** Its output; the schema it lists describes a refusal too (outcomes, R48). */
  outputSchema: z.ZodRawShape;
  /**
   * Takes the arguments its input schema produced (method syntax: each tool narrows them);
   * `base` is the service's address as this client reaches it.
   */
  run(
    principal: Principal,
    args: object,
    signal: AbortSignal,
    base: string,
  ): Promise<Record<string, unknown>>;
  /** What the agent should do next after this output, when the output alone does not say. */
  next?(output: Record<string, unknown>): string | null;
}

/** A tool's schemas as registerTool takes them, made once. */
interface ToolSchemas {
  input: ReturnType<typeof strictArguments>;
  output: ReturnType<typeof outcomes>;
}

/** The first `max` bytes of `text` in UTF-8, never cutting a character in two. */
function cut(text: string, max: number): { text: string; truncated: boolean } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return { text, truncated: false };
  let end = max;
  // Back up over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return { text: bytes.subarray(0, end).toString('utf8'), truncated: true };
}

const leaseOut = (lease: Lease) => ({
  environment: lease.environment,
  generation: lease.generation,
  holder: lease.holder,
  expiresAt: lease.expiresAt.toISOString(),
});

const deploymentOut = (d: Deployment) => ({
  deployment: {
    id: d.id,
    sequence: d.sequence,
    status: d.status,
    heartbeatExpiresAt: d.heartbeatExpiresAt.toISOString(),
  },
});

/**
 * Wakes a waiting tool when something that matters is recorded in one environment (every
 * decision writes an audit event, on any instance): a reason to read or try again, never a
 * decision.
 */
class EnvironmentSignal {
  private seen = 0;
  private wake: (() => void) | null = null;
  private readonly stop: () => void;

  constructor(
    events: EventsService,
    environment: string,
    matters: (kind: EventKind, object: Plan | AuditEvent | Deployment) => boolean = () => true,
  ) {
    this.stop = events.onDelivered((kind, object) => {
      if (object.environment !== environment || !matters(kind, object)) return;
      this.seen++;
      this.wake?.();
    });
  }

  get count(): number {
    return this.seen;
  }

  /** Resolves after `ms`, on the first event after `since` events, or when `signal` aborts. */
  wait(since: number, ms: number, signal: AbortSignal): Promise<void> {
    if (this.seen !== since || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal.addEventListener('abort', done);
      this.wake = done;
    });
  }

  close(): void {
    this.stop();
    this.wake?.();
  }
}

/**
 * The MCP tools (DESIGN §14). Each one stands for a GraphQL operation and calls the same
 * service method its resolver calls, through McpGate (R28); none decides anything itself.
 */
/** What one MCP request brings to the tools it runs. */
export interface McpCall {
  /** The service's address as this client reaches it (reviewUrl, R49). */
  base: string;
  /** Hears the code of each refusal (the request's log line). */
  refused?: (code: string) => void;
  /**
   * A batch's calls take turns: one runs at a time, each after the event loop has had a turn
   * (a batch of plan reads would otherwise hold the process for all of them at once).
   */
  turns?: FifoSemaphore;
}

@Injectable()
export class McpTools {
  readonly specs: ToolSpec[];
  private readonly schemas = new Map<ToolSpec, ToolSchemas>();

  constructor(
    private readonly gate: McpGate,
    private readonly environments: EnvironmentsService,
    private readonly plans: PlansService,
    private readonly checks: ChecksService,
    private readonly leases: LeasesService,
    private readonly queue: LeaseQueueService,
    private readonly deployments: DeploymentsService,
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {
    this.specs = this.define();
    for (const spec of this.specs)
      this.schemas.set(spec, {
        input: strictArguments(spec.inputSchema),
        output: outcomes(spec.outputSchema),
      });
  }

  /** R29: the tools `principal` may call (none for ADMIN: agents run with least privilege). */
  visibleTo(principal: Principal): ToolSpec[] {
    if (principal.role === Role.ADMIN) return [];
    return this.specs.filter((spec) => this.gate.mayCall(principal, spec.standsFor));
  }

  /**
   * Registers on `server` the tools `principal` may call; each result is its output (with
   * the next step, where the tool has one), or a refusal (R30).
   */
  register(server: McpServer, principal: Principal, call: McpCall): void {
    const refused = call.refused ?? (() => undefined);
    for (const spec of this.visibleTo(principal)) {
      const schemas = this.schemas.get(spec)!;
      server.registerTool(
        spec.name,
        {
          title: spec.title,
          description: spec.description,
          inputSchema: schemas.input,
          outputSchema: schemas.output,
          annotations: { title: spec.title, ...spec.annotations },
        },
        async (args: Record<string, unknown>, extra): Promise<CallToolResult> => {
          const turn = call.turns?.take();
          if (turn) {
            await turn.ready;
            await new Promise((resolve) => setImmediate(resolve));
          }
          try {
            const output = await spec.run(principal, args, extra.signal, call.base);
            const next = spec.next?.(output);
            return {
              structuredContent: output,
              content: [
                // A summary: the output itself is structuredContent (a plan is sent once).
                { type: 'text', text: brief(output) },
                ...(next ? [{ type: 'text' as const, text: next }] : []),
              ],
            };
          } catch (error) {
            const result = refusal(error);
            refused((result.structuredContent as { code: string }).code);
            return result;
          } finally {
            turn?.end();
          }
        },
      );
    }
  }

  private pass<T>(principal: Principal, operation: Operation, work: () => Promise<T>): Promise<T> {
    return this.gate.pass(principal, operation, work);
  }

  private async planOut(plan: Plan) {
    const content = cut(plan.content, MAX_TOOL_CONTENT_BYTES);
    return {
      id: plan.id,
      environment: plan.environment,
      generation: plan.generation,
      sequence: plan.sequence,
      status: await this.plans.status(plan),
      title: plan.title,
      contentType: plan.contentType,
      contentHash: plan.contentHash,
      // The stored summary (JSON; a plan read back from an event holds a promise of it).
      summary: await summaryOf(plan),
      pendingApprovalRules: await this.plans.pendingApprovalRules(plan),
      policyResults: plan.policyResults ?? [],
      content: content.text,
      contentTruncated: content.truncated,
    };
  }

  private acquireOnce(principal: Principal, raw: Record<string, unknown>): Promise<Lease> {
    return this.pass(
      principal,
      { handler: method(LeasesResolver, 'acquireLease'), root: 'Mutation', args: { input: raw } },
      async () => this.leases.acquire(principal, await this.gate.valid(AcquireLeaseInput, raw)),
    );
  }

  /**
   * acquire_lease with `waitSeconds` > 0 waits its turn in the environment's lease queue
   * (DESIGN §17): a ticket with maxWaitSeconds = waitSeconds (enqueueLease, checked, charged
   * and audited like the GraphQL call), read again whenever the environment records
   * something (and every 250 ms), until it is granted. A ticket not granted in time has
   * expired (R39); the answer is then what acquireLease says at that moment. A call cancelled
   * while its ticket waits cancels the ticket; one granted as the call was cancelled is released.
   */
  private async acquire(
    principal: Principal,
    args: { environment: string; ttlSeconds: number; instance?: string; waitSeconds: number },
    signal: AbortSignal,
  ): Promise<Lease> {
    const { waitSeconds } = await this.gate.valid(
      LeaseWaitInput,
      { waitSeconds: args.waitSeconds },
      'waitSeconds',
    );
    const raw = {
      environment: args.environment,
      ttlSeconds: args.ttlSeconds,
      instance: args.instance ?? null,
    };
    if (waitSeconds === 0) return this.acquireOnce(principal, raw);
    const request = { ...raw, maxWaitSeconds: waitSeconds };
    let ticket = await this.pass(
      principal,
      {
        handler: method(LeaseQueueResolver, 'enqueueLease'),
        root: 'Mutation',
        args: { input: request },
      },
      async () => this.queue.enqueue(principal, await this.gate.valid(EnqueueLeaseInput, request)),
    );
    const wake = new EnvironmentSignal(this.events, args.environment);
    try {
      while (ticket.status === LeaseTicketStatus.WAITING && !signal.aborted) {
        const since = wake.count;
        const left = ticket.expiresAt.getTime() - (await this.clock.now());
        if (left <= 0) break;
        await wake.wait(since, Math.min(left, 250), signal);
        ticket = (await this.queue.find(ticket.id)) ?? ticket;
      }
    } finally {
      wake.close();
    }
    if (signal.aborted) {
      // The caller left (it cancelled the call, or its connection closed): a ticket still
      // waiting is cancelled, so that the lease is never handed to nobody, and nothing more
      // is acquired for it. One granted as the caller left (before its cancellation was
      // decided) is a lease nobody will use: it is released, fenced by its generation, so
      // that the next ticket goes on now instead of when it expires.
      // The caller's door is MCP: these decisions are audited `via: mcp` like the call's own.
      if (ticket.status === LeaseTicketStatus.WAITING) {
        const waiting = ticket;
        ticket = await throughMcp(() => this.queue.cancel(principal, waiting));
      }
      const granted = ticket;
      const released =
        granted.status === LeaseTicketStatus.GRANTED &&
        (await throughMcp(() => this.giveBack(principal, granted)));
      throw new McpError(
        'BAD_USER_INPUT',
        `the call was cancelled while lease ticket ${ticket.id} waited; the ticket is ${ticket.status}` +
          (released
            ? `; the lease it was granted (generation ${ticket.generation}) is released`
            : ''),
      );
    }
    if (ticket.status === LeaseTicketStatus.GRANTED) {
      const lease = await this.queue.lease(ticket);
      if (lease) return lease;
    }
    return this.acquireOnce(principal, raw);
  }

  /**
   * Releases the lease a ticket was granted, while it is still that grant's. False when it
   * is not (it expired, or was released already): the guard refused, nothing changed.
   */
  private async giveBack(
    principal: Principal,
    ticket: { environment: string; generation: number | null },
  ): Promise<boolean> {
    if (ticket.generation == null) return false;
    try {
      await this.leases.release(principal, {
        environment: ticket.environment,
        generation: ticket.generation,
      });
      return true;
    } catch (error) {
      if (error instanceof FenceError) return false;
      throw error;
    }
  }

  /** wait_for_decision: reads the plan again whenever its environment records something, at its expiry, and at the time-out. */
  private async waitForDecision(
    principal: Principal,
    args: { planId: string; timeoutSeconds: number },
    signal: AbortSignal,
  ) {
    return this.pass(
      principal,
      { handler: method(PlansResolver, 'plan'), root: 'Query', args: { id: args.planId } },
      async () => {
        const input = await this.gate.valid(WaitForDecisionInput, args, 'arguments');
        const deadline = performance.now() + input.timeoutSeconds * 1000;
        const wake = new EnvironmentSignal(
          this.events,
          PlanId.environmentOf(input.planId) ?? input.planId,
        );
        try {
          for (;;) {
            const since = wake.count;
            const plan = await this.plans.find(input.planId);
            if (!plan) throw new McpError('NOT_FOUND', `plan ${input.planId} does not exist`);
            const status = await this.plans.status(plan);
            const left = deadline - performance.now();
            if (status !== PlanStatus.PROPOSED || left <= 0 || signal.aborted) {
              return { plan: { id: plan.id, status }, decided: status !== PlanStatus.PROPOSED };
            }
            const untilExpiry = plan.expiresAt
              ? plan.expiresAt.getTime() - (await this.clock.now()) + 20
              : left;
            await wake.wait(since, Math.min(left, Math.max(50, untilExpiry)), signal);
          }
        } finally {
          wake.close();
        }
      },
    );
  }

  /**
   * A key from what makes two submits the same (R9 then replays the first outcome): the
   * principal, environment, generation, content and title, and the content type, artifact
   * and source revision where given (so a TEXT submit without them keeps the key it always
   * had). A call that differs in any of these is another call, with another key.
   */
  static derivedKey(
    principal: string,
    environment: string,
    generation: number,
    content: string,
    title: string | null,
    more: {
      contentType?: string;
      artifact?: string | null;
      sourceRevision?: string | null;
    } = {},
  ): string {
    const given = {
      ...(more.contentType != null && more.contentType !== 'TEXT'
        ? { contentType: more.contentType }
        : {}),
      ...(more.artifact != null ? { artifact: sha256(more.artifact) } : {}),
      ...(more.sourceRevision != null ? { sourceRevision: more.sourceRevision } : {}),
    };
    const call: unknown[] = [principal, environment, generation, sha256(content), title];
    if (Object.keys(given).length > 0) call.push(given);
    return `mcp-${sha256(JSON.stringify(call))}`;
  }

  private define(): ToolSpec[] {
    return [
      {
        name: 'list_environments',
        title: 'List environments',
        description:
          'The environments this token may see: fencing mode, freeze, published plan, and the live lease (holder, generation, expiry).',
        standsFor: method(EnvironmentsResolver, 'environments'),
        annotations: READ,
        inputSchema: {},
        outputSchema: {
          environments: z.array(
            z.object({
              name: z.string(),
              mode: z.enum(['MONOTONIC', 'STRICT']),
              frozen: z.boolean(),
              currentPlanId: z.string().nullable(),
              lease: z
                .object({ holder: z.string(), generation: z.number().int(), expiresAt: iso })
                .nullable(),
              queueLength: z.number().int().describe('agents waiting for the lease'),
            }),
          ),
        },
        run: (principal) =>
          this.pass(
            principal,
            { handler: method(EnvironmentsResolver, 'environments'), root: 'Query', args: {} },
            async () => {
              const all = await this.environments.list();
              const visible = all.filter((env) =>
                allowsEnvironment(principal.environments, env.name),
              );
              return {
                environments: await Promise.all(
                  visible.map(async (env) => {
                    const lease = await this.environments.lease(env);
                    return {
                      name: env.name,
                      mode: env.mode,
                      frozen: env.frozenAt != null,
                      currentPlanId: env.currentPlanId,
                      lease: lease && {
                        holder: lease.holder,
                        generation: lease.generation,
                        expiresAt: lease.expiresAt.toISOString(),
                      },
                      queueLength: (await this.queue.queue(env.name)).length,
                    };
                  }),
                ),
              };
            },
          ),
      },
      {
        name: 'get_plan',
        title: 'Read a plan',
        description: `One plan by planId (<environment>@<generation>.<sequence>), or the published plan of an environment. Content is cut at ${MAX_TOOL_CONTENT_BYTES / 1024} KiB (contentTruncated). plan is null when there is none.`,
        standsFor: method(PlansResolver, 'plan'),
        annotations: READ,
        inputSchema: {
          planId: z.string().optional().describe('<environment>@<generation>.<sequence>'),
          environment: z.string().optional().describe("read this environment's published plan"),
        },
        outputSchema: {
          plan: z
            .object({
              id: z.string(),
              environment: z.string(),
              generation: z.number().int(),
              sequence: z.number().int(),
              status: planStatus,
              title: z.string().nullable(),
              contentType: z.enum(['TEXT', 'TERRAFORM_PLAN_JSON']).nullable(),
              contentHash: z.string().describe('SHA-256 of the content'),
              summary: z.object({}).passthrough().nullable(),
              pendingApprovalRules: z.array(approvalRule),
              policyResults: z.array(policyResult),
              content: z.string(),
              contentTruncated: z.boolean(),
            })
            .nullable(),
        },
        run: async (principal, args: { planId?: string; environment?: string }) => {
          // The arguments are checked as the GraphQL query's are (BAD_USER_INPUT).
          if (args.planId !== undefined) {
            const { id } = await this.gate.valid(PlanArgs, { id: args.planId }, 'planId');
            const plan = await this.pass(
              principal,
              { handler: method(PlansResolver, 'plan'), root: 'Query', args: { id } },
              () => this.plans.find(id),
            );
            return { plan: plan && (await this.planOut(plan)) };
          }
          if (args.environment === undefined)
            throw new McpError('BAD_USER_INPUT', 'get_plan needs planId or environment');
          const { environment } = await this.gate.valid(
            EnvironmentArgs,
            { environment: args.environment },
            'environment',
          );
          const plan = await this.pass(
            principal,
            {
              handler: method(EnvironmentsResolver, 'currentPlan'),
              root: 'Query',
              args: { environment },
            },
            () => this.environments.currentPlan(environment),
          );
          return { plan: plan && (await this.planOut(plan)) };
        },
      },
      {
        name: 'acquire_lease',
        title: 'Acquire the lease',
        description:
          'Takes the lease on an environment and returns a new generation (the fencing token). Carry it to every submit_plan; it never changes when renewing. waitSeconds > 0 waits its turn in the lease queue of the environment for a lease another agent holds.',
        standsFor: method(LeasesResolver, 'acquireLease'),
        annotations: {
          readOnlyHint: false,
          destructiveHint: false,
          idempotentHint: false,
          openWorldHint: false,
        },
        inputSchema: {
          environment: z.string(),
          ttlSeconds: z.number().int().default(30).describe('1..3600'),
          instance: z
            .string()
            .optional()
            .describe('label of this worker; the holder becomes principal/instance'),
          waitSeconds: z
            .number()
            .int()
            .default(0)
            .describe('0..300: how long to wait while another holder has the lease'),
        },
        outputSchema: leaseView,
        run: async (
          principal,
          args: { environment: string; ttlSeconds: number; instance?: string; waitSeconds: number },
          signal,
        ) => leaseOut(await this.acquire(principal, args, signal)),
      },
      {
        name: 'renew_lease',
        title: 'Renew the lease',
        description:
          'Extends the lease of the generation you hold; the generation stays the same. LEASE_NOT_HELD once it expired or was taken.',
        standsFor: method(LeasesResolver, 'renewLease'),
        annotations: {
          readOnlyHint: false,
          destructiveHint: false,
          idempotentHint: true,
          openWorldHint: false,
        },
        inputSchema: {
          environment: z.string(),
          generation: z.number().int(),
          ttlSeconds: z.number().int().default(30).describe('1..3600'),
        },
        outputSchema: leaseView,
        run: (principal, args: { environment: string; generation: number; ttlSeconds: number }) =>
          this.pass(
            principal,
            {
              handler: method(LeasesResolver, 'renewLease'),
              root: 'Mutation',
              args: { input: args },
            },
            async () =>
              leaseOut(
                await this.leases.renew(principal, await this.gate.valid(RenewLeaseInput, args)),
              ),
          ),
      },
      {
        name: 'release_lease',
        title: 'Release the lease',
        description:
          'Gives the lease back when the work is done, so that the next agent need not wait for it to expire.',
        standsFor: method(LeasesResolver, 'releaseLease'),
        annotations: {
          readOnlyHint: false,
          destructiveHint: false,
          idempotentHint: false,
          openWorldHint: false,
        },
        inputSchema: { environment: z.string(), generation: z.number().int() },
        outputSchema: { released: z.boolean() },
        run: (principal, args: { environment: string; generation: number }) =>
          this.pass(
            principal,
            {
              handler: method(LeasesResolver, 'releaseLease'),
              root: 'Mutation',
              args: { input: args },
            },
            async () => ({
              released: await this.leases.release(
                principal,
                await this.gate.valid(ReleaseLeaseInput, args),
              ),
            }),
          ),
      },
      {
        name: 'submit_plan',
        title: 'Submit a plan',
        description:
          'Proposes a plan made under your generation: text, or a Terraform plan (contentType TERRAFORM_PLAN_JSON: the output of terraform show -json, with the binary plan file as artifact). A human reviews and publishes it at its reviewUrl; no tool approves. Refused with STALE_GENERATION when a newer generation has written. Repeating the same call returns the same plan. Arguments other than these are refused.',
        standsFor: method(PlansResolver, 'submitPlan'),
        annotations: {
          readOnlyHint: false,
          destructiveHint: false,
          idempotentHint: true,
          openWorldHint: false,
        },
        inputSchema: {
          environment: z.string(),
          generation: z.number().int().describe('the generation acquire_lease returned'),
          content: z
            .string()
            .describe('the plan: text, or the JSON of terraform show -json PLANFILE'),
          title: z.string().optional(),
          contentType: z.enum(['TEXT', 'TERRAFORM_PLAN_JSON']).default('TEXT'),
          artifact: z
            .string()
            .optional()
            .describe(
              'TERRAFORM_PLAN_JSON only: base64 of the binary plan file (terraform plan -out) the content was shown from',
            ),
          sourceRevision: z
            .string()
            .optional()
            .describe(
              'the revision of the source the plan was made from (a commit), 1..255 characters',
            ),
          basedOnPlanId: z
            .string()
            .optional()
            .describe('publish only while this is still the published plan'),
          basedOnDeploymentSequence: z
            .number()
            .int()
            .optional()
            .describe(
              "publish and deploy only while the environment's deploymentSequence is still this",
            ),
          idempotencyKey: z
            .string()
            .optional()
            .describe('default: derived from the call, so a repeated call returns the same plan'),
        },
        outputSchema: {
          plan: z.object({
            id: z.string(),
            status: planStatus,
            contentHash: z.string(),
            summary: planCounts
              .nullable()
              .describe('TERRAFORM_PLAN_JSON: resource changes counted by action; null for TEXT'),
            pendingApprovalRules: z.array(approvalRule),
            pendingChecks: z
              .array(z.string())
              .describe('required checks whose SUCCESS publication still waits for (R50)'),
            policyResults: z.array(policyResult),
            reviewUrl: z
              .string()
              .describe("the plan's page in the console, where a person reviews it"),
          }),
        },
        run: (
          principal,
          args: {
            environment: string;
            generation: number;
            content: string;
            title?: string;
            contentType?: 'TEXT' | 'TERRAFORM_PLAN_JSON';
            artifact?: string;
            sourceRevision?: string;
            basedOnPlanId?: string;
            basedOnDeploymentSequence?: number;
            idempotencyKey?: string;
          },
          _signal,
          base,
        ) => {
          const input = {
            environment: args.environment,
            generation: args.generation,
            content: args.content,
            title: args.title ?? null,
            contentType: args.contentType ?? 'TEXT',
            artifact: args.artifact ?? null,
            sourceRevision: args.sourceRevision ?? null,
            basedOnPlanId: args.basedOnPlanId ?? null,
            basedOnDeploymentSequence: args.basedOnDeploymentSequence ?? null,
            idempotencyKey:
              args.idempotencyKey ??
              McpTools.derivedKey(
                principal.name,
                args.environment,
                args.generation,
                args.content,
                args.title ?? null,
                {
                  contentType: args.contentType,
                  artifact: args.artifact,
                  sourceRevision: args.sourceRevision,
                },
              ),
          };
          return this.pass(
            principal,
            { handler: method(PlansResolver, 'submitPlan'), root: 'Mutation', args: { input } },
            async () => {
              const plan = await this.plans.submit(
                principal,
                await this.gate.valid(SubmitPlanInput, input),
              );
              return {
                plan: {
                  id: plan.id,
                  status: await this.plans.status(plan),
                  contentHash: plan.contentHash,
                  summary: countsOf(await summaryOf(plan)),
                  pendingApprovalRules: await this.plans.pendingApprovalRules(plan),
                  pendingChecks: await this.checks.pending(plan),
                  policyResults: plan.policyResults ?? [],
                  reviewUrl: reviewUrl(base, plan.id),
                },
              };
            },
          );
        },
        next: (output) => afterSubmit((output as { plan: SubmittedPlan }).plan),
      },
      {
        name: 'wait_for_decision',
        title: 'Wait for a decision',
        description:
          'Waits until a plan is no longer PROPOSED (published, rejected, obsolete, expired) or timeoutSeconds pass; decided says which.',
        standsFor: method(PlansResolver, 'plan'),
        annotations: READ,
        inputSchema: {
          planId: z.string(),
          timeoutSeconds: z.number().int().default(60).describe('1..120'),
        },
        outputSchema: {
          plan: z.object({ id: z.string(), status: planStatus }),
          decided: z.boolean().describe('false: still PROPOSED at the time-out'),
        },
        run: (principal, args: { planId: string; timeoutSeconds: number }, signal) =>
          this.waitForDecision(principal, args, signal),
      },
      {
        name: 'start_deployment',
        title: 'Start a deployment',
        description:
          "Starts deploying an environment's published plan; returns the deployment and its sequence (the fencing token for the system that applies it). Keep it alive with heartbeat_deployment, end it with finish_deployment.",
        standsFor: method(DeploymentsResolver, 'startDeployment'),
        annotations: DEPLOY,
        inputSchema: {
          planId: z.string().describe("must be the environment's published plan"),
          heartbeatSeconds: z.number().int().default(60).describe('5..3600'),
          idempotencyKey: z.string().optional(),
        },
        outputSchema: { deployment: deploymentView },
        run: (
          principal,
          args: { planId: string; heartbeatSeconds: number; idempotencyKey?: string },
        ) => {
          const input = {
            environment: PlanId.environmentOf(args.planId) ?? args.planId,
            planId: args.planId,
            heartbeatSeconds: args.heartbeatSeconds,
            idempotencyKey: args.idempotencyKey ?? `mcp-${randomUUID()}`,
          };
          return this.pass(
            principal,
            {
              handler: method(DeploymentsResolver, 'startDeployment'),
              root: 'Mutation',
              args: { input },
            },
            async () =>
              deploymentOut(
                await this.deployments.start(
                  principal,
                  await this.gate.valid(StartDeploymentInput, input),
                ),
              ),
          );
        },
      },
      {
        name: 'heartbeat_deployment',
        title: 'Heartbeat a deployment',
        description:
          'Keeps your deployment alive; without heartbeats it reads UNKNOWN and a reviewer must reconcile it.',
        standsFor: method(DeploymentsResolver, 'heartbeatDeployment'),
        annotations: DEPLOY,
        inputSchema: {
          deploymentId: z.string().describe('<environment>#<sequence>'),
          heartbeatSeconds: z.number().int().default(60).describe('5..3600'),
        },
        outputSchema: { deployment: deploymentView },
        run: (principal, args: { deploymentId: string; heartbeatSeconds: number }) =>
          this.pass(
            principal,
            {
              handler: method(DeploymentsResolver, 'heartbeatDeployment'),
              root: 'Mutation',
              args: { input: args },
            },
            async () =>
              deploymentOut(
                await this.deployments.heartbeat(
                  principal,
                  await this.gate.valid(HeartbeatDeploymentInput, args),
                ),
              ),
          ),
      },
      {
        name: 'finish_deployment',
        title: 'Finish a deployment',
        description:
          'Reports the outcome of your deployment, SUCCEEDED or FAILED, with an optional detail.',
        standsFor: method(DeploymentsResolver, 'finishDeployment'),
        annotations: DEPLOY,
        inputSchema: {
          deploymentId: z.string().describe('<environment>#<sequence>'),
          outcome: z.enum(['SUCCEEDED', 'FAILED']),
          detail: z.string().optional().describe('up to 4096 characters'),
        },
        outputSchema: { deployment: deploymentView },
        run: (principal, args: { deploymentId: string; outcome: string; detail?: string }) => {
          const input = {
            deploymentId: args.deploymentId,
            outcome: args.outcome,
            detail: args.detail ?? null,
            idempotencyKey: null,
          };
          return this.pass(
            principal,
            {
              handler: method(DeploymentsResolver, 'finishDeployment'),
              root: 'Mutation',
              args: { input },
            },
            async () =>
              deploymentOut(
                await this.deployments.finish(
                  principal,
                  await this.gate.valid(FinishDeploymentInput, input),
                ),
              ),
          );
        },
      },
    ];
  }
}

/** What afterSubmit reads of submit_plan's output. */
interface SubmittedPlan {
  id: string;
  status: string;
  reviewUrl: string;
  pendingChecks: string[];
}

/** The counts of a stored Terraform summary (its resources and version left out), or null. */
function countsOf(summary: Record<string, unknown> | null): PlanCounts | null {
  if (!summary) return null;
  const count = (key: keyof PlanCounts) => Number(summary[key] ?? 0);
  return {
    add: count('add'),
    change: count('change'),
    destroy: count('destroy'),
    replace: count('replace'),
    read: count('read'),
    noop: count('noop'),
  };
}

async function summaryOf(plan: Plan): Promise<Record<string, unknown> | null> {
  const stored = await Promise.resolve(plan.summary as string | null | Promise<string | null>);
  return stored ? (JSON.parse(stored) as Record<string, unknown>) : null;
}
