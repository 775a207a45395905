import { createHmac, timingSafeEqual } from 'node:crypto';

/** A request signed longer ago than this (either way) is refused (R45). */
export const MAX_SIGNATURE_AGE_SECONDS = 300;

/** `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}` under the signing secret: Slack's v0 signature. */
export function slackSignature(secret: string, timestamp: string, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

/**
 * Why a request does not carry a valid v0 signature, or null when it does (R45): the
 * timestamp must be whole seconds within MAX_SIGNATURE_AGE_SECONDS of `nowMs`, and the
 * signature the HMAC of exactly the raw body, compared in constant time.
 */
export function signatureProblem(
  secret: string,
  timestamp: string | undefined,
  signature: string | undefined,
  body: string,
  nowMs: number,
): string | null {
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) return 'no valid X-Slack-Request-Timestamp';
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > MAX_SIGNATURE_AGE_SECONDS)
    return 'X-Slack-Request-Timestamp is more than 5 minutes from now';
  if (!signature) return 'no X-Slack-Signature';
  const expected = Buffer.from(slackSignature(secret, timestamp, body));
  const given = Buffer.from(signature);
  // Lengths first (timingSafeEqual needs equal lengths; the length is no secret).
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return 'X-Slack-Signature does not match';
  return null;
}
