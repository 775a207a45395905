import { Controller, Delete, Get, Inject, Post, Req, Res } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { authenticateOnce } from '../auth/authenticate.js';
import { AuthError } from '../auth/auth.errors.js';
import { AuthService } from '../auth/auth.service.js';
import { Role } from '../common/role.js';
import type { LoggedRequest } from '../common/logging.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { extensionsOf } from '../common/errors.js';
import { BusyError } from '../common/limit.errors.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';
import { HeavyQueryGate } from '../limits/heavy-queries.js';
import { authentications, refusedRequests } from '../limits/limit-metrics.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { RPC_OUTCOMES, rpcError } from './json-rpc.js';
import { type McpWeights, priceMcpBody } from './mcp.pricing.js';
import type { mcpServerFor } from './mcp.server.js';
import type { McpTools } from './mcp.tools.js';

const METADATA_PATH = '/.well-known/oauth-protected-resource';

/** What answers MCP, loaded on the first POST /mcp. */
interface McpRuntime {
  tools: McpTools;
  serverFor: typeof mcpServerFor;
  Transport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
}

/**
 * Why a `tools/call` request's params cannot be a call, or null. The protocol library would
 * answer such a request with -32603 ("internal error") and its schema's whole report.
 */
function malformedToolCall(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const { method, params } = body as { method?: unknown; params?: unknown };
  if (method !== 'tools/call') return null;
  const call = (typeof params === 'object' && params !== null ? params : null) as {
    name?: unknown;
    arguments?: unknown;
  } | null;
  const args = call?.arguments;
  if (
    !call ||
    Array.isArray(call) ||
    typeof call.name !== 'string' ||
    (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args)))
  ) {
    return 'tools/call needs params { name: string, arguments?: object }';
  }
  return null;
}

/**
 * The MCP endpoint (DESIGN §14): `POST /mcp`, Streamable HTTP in stateless mode (each POST
 * is answered on its own; no session), authenticated with the planfence bearer token. The
 * SDK's transport speaks the protocol; Host and Origin are checked before it (DNS rebinding,
 * `foreign`, with a refusal that names the setting to change); the tools are McpTools, built
 * per request for the caller's role. The SDK, zod and the tools' schemas load with the first
 * POST /mcp (about 9 MiB a service that no agent speaks MCP to never holds); that first
 * request waits for them.
 */
@Controller()
export class McpController {
  private readonly lookups;
  private loading: Promise<McpRuntime> | null = null;

  /** The slots batches and expensive requests to /mcp run in (GraphQL's heavy queries have theirs). */
  private readonly heavy: HeavyQueryGate;
  private readonly weights: McpWeights;
  private readonly refusedLimits;

  constructor(
    private readonly auth: AuthService,
    private readonly moduleRef: ModuleRef,
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
    metrics: MetricsService,
  ) {
    this.lookups = authentications(metrics.registry);
    this.refusedLimits = refusedRequests(metrics.registry);
    this.heavy = new HeavyQueryGate(config.limits.maxHeavyQueries, config.limits.heavyQueryWaitMs);
    this.weights = { contentWeight: Math.ceil(config.maxPlanBytes / 1024), limits: config.limits };
  }

  private runtime(): Promise<McpRuntime> {
    this.loading ??= (async () => {
      const [{ McpTools }, { mcpServerFor }, { StreamableHTTPServerTransport }] = await Promise.all(
        [
          import('./mcp.tools.js'),
          import('./mcp.server.js'),
          import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
        ],
      );
      const tools = await this.moduleRef.create(McpTools);
      return { tools, serverFor: mcpServerFor, Transport: StreamableHTTPServerTransport };
    })().catch((error: unknown) => {
      this.loading = null;
      throw error;
    });
    return this.loading;
  }

  /**
   * The service's address as the client sees it: PLANFENCE_PUBLIC_URL, else this request's
   * Host when it is an allowed one (a foreign Host is never echoed into a challenge). The
   * 401 challenge, the metadata document and each plan's reviewUrl (R49) are under it.
   */
  private base(req: FastifyRequest): string {
    if (this.config.mcp.publicUrl) return this.config.mcp.publicUrl;
    const allowed = this.allowedHosts();
    return `${req.protocol}://${allowed.includes(req.host) ? req.host : allowed[0]}`;
  }

  private port(): number | null {
    const server = this.adapterHost.httpAdapter.getHttpServer() as Server;
    const address = server.address() as AddressInfo | null;
    return address && typeof address === 'object' ? address.port : null;
  }

  /** Host values a request to /mcp may carry: configured, or the loopback names on the listening port and the public URL's host. */
  private allowedHosts(): string[] {
    const configured = this.config.mcp.allowedHosts;
    if (configured) return configured;
    const port = this.port();
    const hosts = ['127.0.0.1', 'localhost', '[::1]'].map((name) => `${name}:${port}`);
    if (!['0.0.0.0', '::', '127.0.0.1', 'localhost'].includes(this.config.host))
      hosts.push(
        `${this.config.host.includes(':') ? `[${this.config.host}]` : this.config.host}:${port}`,
      );
    if (this.config.mcp.publicUrl) hosts.push(new URL(this.config.mcp.publicUrl).host);
    return hosts;
  }

  /** Why a request's Host or Origin is not one /mcp answers (DNS rebinding), or null. */
  private foreign(req: FastifyRequest): string | null {
    if (!this.allowedHosts().includes(req.headers.host ?? ''))
      return 'this Host is not one the service answers MCP on: set PLANFENCE_MCP_ALLOWED_HOSTS (host:port, comma-separated) or PLANFENCE_PUBLIC_URL to the address agents use (docs/mcp.md#configuration)';
    const origin = req.headers.origin;
    if (origin !== undefined && !this.allowedOrigins().includes(origin))
      return 'this Origin is not one the service answers MCP from: set PLANFENCE_MCP_ALLOWED_ORIGINS (docs/mcp.md#configuration)';
    return null;
  }

  /** Origin values a browser request may carry (requests without Origin, as agents send them, pass). */
  private allowedOrigins(): string[] {
    const configured = this.config.mcp.allowedOrigins;
    if (configured) return configured;
    const origins = this.allowedHosts().map((host) => `http://${host}`);
    if (this.config.mcp.publicUrl) origins.push(new URL(this.config.mcp.publicUrl).origin);
    return origins;
  }

  @Post('mcp')
  async post(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const logged = req as FastifyRequest & LoggedRequest;
    let principal;
    try {
      principal = await authenticateOnce(this.auth, req, this.lookups);
    } catch (error) {
      if (!(error instanceof AuthError)) throw error;
      // RFC 9728 §5.1: where to learn how to get a token for this resource.
      const given = Boolean(req.headers.authorization);
      logged.outcome = 'UNAUTHENTICATED';
      await reply
        .code(401)
        .header(
          'www-authenticate',
          `Bearer resource_metadata="${this.base(req)}${METADATA_PATH}"${given ? ', error="invalid_token"' : ''}`,
        )
        .send(rpcError(-32001, error.message));
      return;
    }
    if (principal.role === Role.ADMIN) {
      logged.outcome = 'FORBIDDEN';
      await reply
        .code(403)
        .send(
          rpcError(
            -32001,
            'ADMIN tokens are refused on MCP: give the agent a token of its own role (AGENT, DEPLOYER, REVIEWER or VIEWER)',
          ),
        );
      return;
    }
    const refused = this.foreign(req);
    if (refused) {
      logged.outcome = 'FORBIDDEN';
      await reply.code(403).send(rpcError(-32000, refused));
      return;
    }
    // JSON-RPC 2.0 §6: an empty batch is one Invalid Request (the transport would answer 202).
    if (Array.isArray(req.body) && req.body.length === 0) {
      logged.outcome = RPC_OUTCOMES[-32600];
      await reply.code(400).send(rpcError(-32600, 'Invalid Request: an empty batch'));
      return;
    }
    const malformed = malformedToolCall(req.body);
    if (malformed) {
      logged.outcome = RPC_OUTCOMES[-32602];
      await reply.send(rpcError(-32602, malformed, (req.body as { id?: unknown }).id ?? null));
      return;
    }
    // Priced like a GraphQL query before anything of it runs (mcp.pricing.ts): refused as a
    // whole over a limit; a batch, or a request as expensive as a heavy query, waits for one
    // of the few slots such requests run in.
    const price = priceMcpBody(req.body, this.weights);
    if (price.refused) {
      const { limit, max, message } = price.refused;
      logged.outcome = 'BAD_USER_INPUT';
      this.refusedLimits.inc({ limit: `mcp_${limit}` });
      await reply
        .code(400)
        .send(rpcError(-32600, message, null, { code: 'BAD_USER_INPUT', limit, max }));
      return;
    }
    let releaseSlot: (() => void) | null = null;
    if (price.batch || price.cost >= this.config.limits.heavyQueryCost) {
      try {
        releaseSlot = await this.heavy.acquire();
      } catch (error) {
        if (!(error instanceof BusyError)) throw error;
        logged.outcome = 'RATE_LIMITED';
        await reply
          .code(429)
          .header('retry-after', String(error.extensions.retryAfterSeconds))
          .send(rpcError(-32000, error.message, null, extensionsOf(error)));
        return;
      }
    }
    const release = () => {
      releaseSlot?.();
      releaseSlot = null;
    };
    reply.raw.on('close', release);
    let runtime: McpRuntime;
    try {
      runtime = await this.runtime();
    } catch (error) {
      release();
      throw error;
    }
    const { tools, serverFor, Transport } = runtime;
    const server = serverFor(principal, tools, {
      base: this.base(req),
      refused: (code) => (logged.outcome = code),
      ...(price.batch ? { turns: new FifoSemaphore(1) } : {}),
    });
    const transport = new Transport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    reply.hijack();
    // The headers Fastify's hooks set (security headers) go out with the transport's answer.
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined) reply.raw.setHeader(name, value);
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    // A JSON-RPC error (an unknown method, params the protocol refuses) is the request's
    // outcome in the log, not OK: read from the start of the answer, however it is written.
    const raw = reply.raw;
    const sniff = (chunk: unknown) => {
      if (logged.outcome !== undefined) return;
      const head =
        typeof chunk === 'string'
          ? chunk.slice(0, 200)
          : chunk instanceof Uint8Array
            ? Buffer.from(chunk.subarray(0, 200)).toString()
            : '';
      if (!head) return;
      const code = /"error":\{"code":(-?\d+)/.exec(head)?.[1];
      logged.outcome = code === undefined ? 'OK' : (RPC_OUTCOMES[Number(code)] ?? `RPC_${code}`);
    };
    const write = raw.write.bind(raw) as (...args: unknown[]) => boolean;
    const end = raw.end.bind(raw) as (...args: unknown[]) => typeof raw;
    raw.write = ((...args: unknown[]) => {
      sniff(args[0]);
      return write(...args);
    }) as typeof raw.write;
    raw.end = ((...args: unknown[]) => {
      if (typeof args[0] !== 'function') sniff(args[0]);
      return end(...args);
    }) as typeof raw.end;
    await server.connect(transport);
    await transport.handleRequest(req.raw, reply.raw, req.body);
  }

  /** Stateless: no server-initiated stream (GET) and no session to end (DELETE). */
  @Get('mcp')
  async get(@Res() reply: FastifyReply): Promise<void> {
    await this.notAllowed(reply);
  }

  @Delete('mcp')
  async delete(@Res() reply: FastifyReply): Promise<void> {
    await this.notAllowed(reply);
  }

  private async notAllowed(reply: FastifyReply): Promise<void> {
    await reply.code(405).header('allow', 'POST').send(rpcError(-32000, 'Method not allowed.'));
  }

  /**
   * RFC 9728: the protected resource's metadata (at the root, and under the resource's path).
   * `authorization_servers` lists the OIDC issuers whose access tokens the service takes
   * (R44, `accessTokens: true`): an MCP host that runs OAuth itself gets a token there, for
   * this resource (RFC 8707), and sends it as its bearer token.
   */
  @Get(['.well-known/oauth-protected-resource', '.well-known/oauth-protected-resource/mcp'])
  metadata(@Req() req: FastifyRequest): Record<string, unknown> {
    const base = this.base(req);
    const issuers = (this.config.identity.oidc?.issuers ?? [])
      .filter((issuer) => issuer.accessTokens)
      .map((issuer) => issuer.issuer);
    return {
      resource: `${base}/mcp`,
      resource_name: 'planfence',
      bearer_methods_supported: ['header'],
      ...(issuers.length ? { authorization_servers: issuers } : {}),
    };
  }
}
