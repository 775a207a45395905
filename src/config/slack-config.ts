import { readFileSync } from 'node:fs';
import { ConfigError } from './config-error.js';

/** One channel and the environments (name patterns, `*` any run of characters) it reviews. */
export interface SlackChannel {
  environments: string[];
  channel: string;
}

/** PLANFENCE_SLACK_CONFIG (DESIGN §20): the Slack app the service talks to and listens for. */
export interface SlackConfig {
  botToken: string;
  signingSecret: string;
  /** Slack's Web API base, without a trailing slash (tests point it at a local server). */
  apiUrl: string;
  channels: SlackChannel[];
}

export const SLACK_API_URL = 'https://slack.com/api';
const KEY = 'PLANFENCE_SLACK_CONFIG';

function problem(message: string): never {
  throw new ConfigError(KEY, message);
}

function nonEmpty(value: unknown, where: string): string {
  if (typeof value !== 'string' || !value.trim()) problem(`${where} must be a non-empty string`);
  return value;
}

/**
 * Reads and validates the file PLANFENCE_SLACK_CONFIG names; null when it is not set (Slack
 * reviews off). A bad file stops the start: ConfigError naming the key and what is wrong.
 */
export function readSlackConfig(env: Record<string, string | undefined>): SlackConfig | null {
  const path = env[KEY];
  if (!path) return null;
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (error) {
    problem(`names a file that cannot be read (${(error as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    problem(`is not valid JSON (${(error as Error).message})`);
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) problem('must hold a JSON object');
  const file = json as Record<string, unknown>;
  const known = ['botToken', 'signingSecret', 'apiUrl', 'channels'];
  const unknown = Object.keys(file).find((key) => !known.includes(key));
  if (unknown) problem(`has an unknown key "${unknown}" (known: ${known.join(', ')})`);
  const botToken = nonEmpty(file.botToken, 'botToken');
  const signingSecret = nonEmpty(file.signingSecret, 'signingSecret');
  const apiUrl = file.apiUrl === undefined ? SLACK_API_URL : nonEmpty(file.apiUrl, 'apiUrl');
  try {
    const url = new URL(apiUrl);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('not http(s)');
  } catch {
    problem(`apiUrl must be an http(s) URL (got "${apiUrl}")`);
  }
  if (!Array.isArray(file.channels) || !file.channels.length)
    problem('channels must be a non-empty list of {environments, channel}');
  const channels = file.channels.map((entry: unknown, i): SlackChannel => {
    const where = `channels[${i}]`;
    if (!entry || typeof entry !== 'object' || Array.isArray(entry))
      problem(`${where} must be an object {environments, channel}`);
    const { environments, channel, ...rest } = entry as Record<string, unknown>;
    const extra = Object.keys(rest)[0];
    if (extra) problem(`${where} has an unknown key "${extra}"`);
    if (
      !Array.isArray(environments) ||
      !environments.length ||
      environments.some((p) => typeof p !== 'string' || !p)
    )
      problem(`${where}.environments must be a non-empty list of environment name patterns`);
    return {
      environments: environments as string[],
      channel: nonEmpty(channel, `${where}.channel`),
    };
  });
  return { botToken, signingSecret, apiUrl: apiUrl.replace(/\/+$/, ''), channels };
}
