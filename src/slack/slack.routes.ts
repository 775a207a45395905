import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Clock } from '../common/clock.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute } from '../database/database.js';
import { PlansService } from '../plans/plans.service.js';
import { SlackCommands } from './slack-commands.js';
import { at, type Json, reasonOf, SlackInteractions } from './slack-interactions.js';
import { REASON_BLOCK, REJECT_CALLBACK } from './slack-message.js';
import { MAX_SIGNATURE_AGE_SECONDS, signatureProblem } from './slack-signature.js';

/** Slack's requests are small; a larger body is refused before it is read. */
const BODY_LIMIT = 256 * 1024;

/**
 * POST /slack/interactions and POST /slack/commands (R45). Their bodies are read raw (a
 * content-type parser scoped to these two routes) so that the v0 signature is checked over
 * exactly the bytes Slack signed; a request whose signature or timestamp is wrong, or that
 * was answered before (a replay of the same signed request), gets 401 before anything runs.
 * Each is acknowledged at once (Slack waits 3 seconds); the work then runs and answers
 * through the Web API.
 */
@Injectable()
export class SlackRoutes implements OnModuleInit {
  private readonly logger = new Logger('SlackRoutes');

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly adapterHost: HttpAdapterHost,
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly interactions: SlackInteractions,
    private readonly commands: SlackCommands,
    private readonly plans: PlansService,
  ) {}

  onModuleInit(): void {
    const slack = this.config.slack;
    if (!slack) return;
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    void fastify.register((scope, _options, done) => {
      // Raw text for every content type, on these routes only.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        '*',
        { parseAs: 'string', bodyLimit: BODY_LIMIT },
        (_req, body, next) => next(null, body),
      );
      scope.post('/slack/interactions', (request, reply) => this.interaction(request, reply));
      scope.post('/slack/commands', (request, reply) => this.command(request, reply));
      done();
    });
  }

  /** null when the request is Slack's and new; else the reply was sent (401). */
  private async refused(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const body = typeof request.body === 'string' ? request.body : '';
    const header = (name: string) => {
      const value = request.headers[name];
      return typeof value === 'string' ? value : undefined;
    };
    const signature = header('x-slack-signature');
    const problem = signatureProblem(
      this.config.slack!.signingSecret,
      header('x-slack-request-timestamp'),
      signature,
      body,
      Date.now(),
    );
    let why = problem;
    if (!why) {
      // A signed request is answered once: the same request again is a replay.
      const now = Date.now();
      const fresh = await this.db.write(async (m) => {
        await execute(m, 'DELETE FROM slack_requests WHERE at < :old', {
          old: now - 2 * MAX_SIGNATURE_AGE_SECONDS * 1000,
        });
        return execute(
          m,
          'INSERT INTO slack_requests (signature, at) VALUES (:signature, :now) ON CONFLICT (signature) DO NOTHING',
          { signature, now },
        );
      });
      if (!fresh) why = 'this signed request was answered before (a replay)';
    }
    if (!why) return false;
    this.logger.warn(`${request.url} refused: ${why}`);
    await reply
      .code(401)
      .type('application/json')
      .send({ error: 'invalid_signature', message: why });
    return true;
  }

  private async interaction(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (await this.refused(request, reply)) return;
    let payload: Json;
    try {
      payload = JSON.parse(
        new URLSearchParams(request.body as string).get('payload') ?? '',
      ) as typeof payload;
    } catch {
      await reply.code(400).send({ error: 'no JSON payload' });
      return;
    }
    if (
      payload.type === 'view_submission' &&
      at(payload, 'view', 'callback_id') === REJECT_CALLBACK
    ) {
      const reason = reasonOf(payload);
      if (!reason || reason.length > 255) {
        await reply.send({
          response_action: 'errors',
          errors: { [REASON_BLOCK]: 'Say why you reject the plan (1 to 255 characters).' },
        });
        return;
      }
      await reply.code(200).send();
      this.later(() => this.interactions.rejectSubmitted(payload));
      return;
    }
    await reply.code(200).send();
    if (payload.type === 'block_actions') this.later(() => this.interactions.action(payload));
  }

  private async command(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (await this.refused(request, reply)) return;
    const form = new URLSearchParams(request.body as string);
    const userId = form.get('user_id');
    const teamId = form.get('team_id');
    const channelId = form.get('channel_id');
    await reply.code(200).send();
    if (!userId || !teamId || !channelId) return;
    this.later(() =>
      this.commands.run({
        user: { teamId, userId },
        channelId,
        text: form.get('text') ?? '',
        base: this.plans.baseUrl(request.headers),
      }),
    );
  }

  private later(work: () => Promise<void>): void {
    setImmediate(() => {
      work().catch((error: unknown) =>
        this.logger.warn(`Slack request failed after its answer: ${(error as Error).message}`),
      );
    });
  }
}
