/**
 * A local stand-in for Slack's Web API (https://api.slack.com/web), answering the methods
 * the service calls as Slack documents them: JSON bodies with a bearer bot token;
 * `{ok: true, ...}` or `{ok: false, error}` with HTTP 200; 429 with Retry-After (seconds)
 * when rate limited. Every call is recorded. Tests can make the next calls of a method
 * answer 429 or 500.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SlackCall {
  method: string;
  /** The Authorization header as sent. */
  authorization: string | undefined;
  body: Record<string, any>;
  /** How it was answered. */
  status: number;
  at: number;
}

export interface PostedMessage {
  channel: string;
  ts: string;
  text: string;
  blocks: any[];
  /** Every version, the first as posted. */
  versions: { text: string; blocks: any[] }[];
}

type Failure = { status: 429; retryAfter: number } | { status: 500 };

export class SlackApiServer {
  readonly calls: SlackCall[] = [];
  /** Messages by ts. */
  readonly messages = new Map<string, PostedMessage>();
  private readonly failures = new Map<string, Failure[]>();
  private server: Server | null = null;
  private nextTs = 1_700_000_000;
  private channels = new Map<string, string>();
  readonly token: string;
  /** While true, chat.postMessage calls are recorded and never answered (a request in flight when the service is killed). */
  holdPosts = false;
  /** chat.postMessage calls held unanswered so far. */
  held = 0;

  constructor(token = 'xoxb-test-bot-token') {
    this.token = token;
  }

  get url(): string {
    const address = this.server!.address() as AddressInfo;
    return `http://127.0.0.1:${address.port}/api`;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = null;
  }

  /** The next `times` calls of `method` answer 429 with Retry-After, or 500. */
  fail(method: string, failure: Failure, times = 1): void {
    const list = this.failures.get(method) ?? [];
    for (let i = 0; i < times; i++) list.push(failure);
    this.failures.set(method, list);
  }

  callsOf(method: string, status = 200): SlackCall[] {
    return this.calls.filter((c) => c.method === method && c.status === status);
  }

  /** The channel id Slack gives a channel name (`#reviews` → `C…`); a channel id stays. */
  channelId(channel: string): string {
    if (/^[CGD][A-Z0-9]+$/.test(channel)) return channel;
    let id = this.channels.get(channel);
    if (!id) {
      id = `C${String(this.channels.size + 1).padStart(8, '0')}`;
      this.channels.set(channel, id);
    }
    return id;
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const method = (req.url ?? '').replace(/^\/api\//, '');
    let body: Record<string, any> = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    } catch {
      body = {};
    }
    const send = (status: number, json: unknown, headers: Record<string, string> = {}) => {
      this.calls.push({
        method,
        authorization: req.headers.authorization,
        body,
        status,
        at: Date.now(),
      });
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
      res.end(JSON.stringify(json));
    };
    if (method === 'chat.postMessage' && this.holdPosts) {
      this.held++;
      return; // never answered; the connection ends with its client
    }
    const failure = this.failures.get(method)?.shift();
    if (failure?.status === 429)
      return send(
        429,
        { ok: false, error: 'ratelimited' },
        { 'retry-after': String(failure.retryAfter) },
      );
    if (failure?.status === 500) return send(500, { ok: false, error: 'internal_error' });
    if (req.headers.authorization !== `Bearer ${this.token}`)
      return send(200, { ok: false, error: 'invalid_auth' });
    switch (method) {
      case 'chat.postMessage': {
        if (!body.channel) return send(200, { ok: false, error: 'channel_not_found' });
        const ts = `${this.nextTs++}.000100`;
        const channel = this.channelId(body.channel);
        const message = {
          channel,
          ts,
          text: body.text,
          blocks: body.blocks ?? [],
          versions: [{ text: body.text, blocks: body.blocks ?? [] }],
        };
        this.messages.set(ts, message);
        return send(200, {
          ok: true,
          channel,
          ts,
          message: { type: 'message', text: body.text, ts, blocks: body.blocks },
        });
      }
      case 'chat.update': {
        const message = this.messages.get(body.ts);
        if (!message || message.channel !== this.channelId(body.channel))
          return send(200, { ok: false, error: 'message_not_found' });
        message.text = body.text;
        message.blocks = body.blocks ?? [];
        message.versions.push({ text: body.text, blocks: message.blocks });
        return send(200, { ok: true, channel: message.channel, ts: body.ts, text: body.text });
      }
      case 'chat.postEphemeral': {
        if (!body.channel || !body.user)
          return send(200, { ok: false, error: 'invalid_arguments' });
        return send(200, { ok: true, message_ts: `${this.nextTs++}.000200` });
      }
      case 'views.open': {
        if (!body.trigger_id || !body.view)
          return send(200, { ok: false, error: 'invalid_arguments' });
        return send(200, { ok: true, view: { id: `V${this.nextTs++}`, ...body.view } });
      }
      default:
        return send(200, { ok: false, error: 'unknown_method' });
    }
  }

  /** What was said to `user` alone, in order. */
  ephemeralTo(user: string): string[] {
    return this.callsOf('chat.postEphemeral')
      .filter((c) => c.body.user === user)
      .map((c) => String(c.body.text));
  }
}

/** Whether a message's blocks still carry the Approve and Reject buttons. */
export function hasButtons(blocks: any[]): boolean {
  return blocks.some(
    (b) => b.type === 'actions' && b.elements.some((e: any) => e.action_id === 'planfence_approve'),
  );
}

/** The value the Approve button of a message carries. */
export function approveValue(blocks: any[]): string {
  for (const b of blocks)
    if (b.type === 'actions')
      for (const e of b.elements) if (e.action_id === 'planfence_approve') return e.value;
  throw new Error('no Approve button');
}

/** Slack's v0 signature of a request body at `timestamp` (seconds), as Slack computes it. */
export function signSlack(secret: string, timestamp: number, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

export interface SignedRequest {
  body: string;
  timestamp: number;
  signature: string;
}

/** A form body signed now (or at `timestamp`) with `secret`. */
export function signedForm(
  secret: string,
  fields: Record<string, string>,
  timestamp = Math.floor(Date.now() / 1000),
): SignedRequest {
  const body = new URLSearchParams(fields).toString();
  return { body, timestamp, signature: signSlack(secret, timestamp, body) };
}

/** Sends a signed request to the service as Slack would; returns the status, the body and how long the answer took. */
export async function sendToService(
  base: string,
  path: '/slack/interactions' | '/slack/commands',
  request: SignedRequest,
): Promise<{ status: number; body: string; ms: number }> {
  const started = Date.now();
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(request.timestamp),
      'x-slack-signature': request.signature,
    },
    body: request.body,
  });
  return { status: response.status, body: await response.text(), ms: Date.now() - started };
}

/** A PLANFENCE_SLACK_CONFIG file for the service, pointed at `slack` (every environment to #reviews by default). */
export function slackConfigFile(
  slack: SlackApiServer,
  signingSecret: string,
  channels: { environments: string[]; channel: string }[] = [
    { environments: ['*'], channel: '#reviews' },
  ],
): string {
  const path = join(mkdtempSync(join(tmpdir(), 'planfence-slack-')), 'slack.json');
  writeFileSync(
    path,
    JSON.stringify({ botToken: slack.token, signingSecret, apiUrl: slack.url, channels }),
  );
  return path;
}
