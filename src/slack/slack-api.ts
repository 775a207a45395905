import type { SlackConfig } from '../config/slack-config.js';

/** A Web API call that failed: `retryAfterMs` when Slack said when to try again (429). */
export class SlackApiError extends Error {
  constructor(
    message: string,
    /** Whether trying again later may succeed (429, 5xx, no answer). */
    readonly retryable: boolean,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
    this.name = 'SlackApiError';
  }
}

/** Slack answers a call within this long, or it is given up (and retried later). */
const CALL_TIMEOUT_MS = 10_000;

/**
 * Slack's Web API as the service uses it: JSON bodies with the bot token as a bearer token;
 * every answer is `{ok: true, ...}` or `{ok: false, error}` (HTTP 200), a 429 with
 * Retry-After (seconds) when rate limited.
 */
export class SlackApi {
  constructor(private readonly config: SlackConfig) {}

  async call<T extends Record<string, unknown>>(
    method: string,
    body: Record<string, unknown>,
  ): Promise<T & { ok: true }> {
    let response: Response;
    try {
      response = await fetch(`${this.config.apiUrl}/${method}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.config.botToken}`,
          'content-type': 'application/json; charset=utf-8',
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
    } catch (error) {
      throw new SlackApiError(`${method}: no answer (${(error as Error).message})`, true);
    }
    if (response.status === 429) {
      const seconds = Number(response.headers.get('retry-after'));
      await response.body?.cancel();
      throw new SlackApiError(
        `${method}: rate limited`,
        true,
        Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : null,
      );
    }
    if (response.status >= 500) {
      await response.body?.cancel();
      throw new SlackApiError(`${method}: HTTP ${response.status}`, true);
    }
    let answer: { ok?: boolean; error?: string } & Record<string, unknown>;
    try {
      answer = (await response.json()) as typeof answer;
    } catch {
      throw new SlackApiError(`${method}: HTTP ${response.status}, not JSON`, true);
    }
    if (answer.ok !== true) {
      const error = String(answer.error ?? `HTTP ${response.status}`);
      throw new SlackApiError(
        `${method}: ${error}`,
        [
          'ratelimited',
          'internal_error',
          'fatal_error',
          'service_unavailable',
          'request_timeout',
        ].includes(error),
      );
    }
    return answer as T & { ok: true };
  }
}
