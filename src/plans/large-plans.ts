import { LARGE_BODY_BYTES } from '../limits/large-bodies.js';

/**
 * A submit whose content is larger than this is a large plan: its request holds several
 * copies of the content while it is decided (the parsed request, the Terraform parse and
 * summary, the idempotency fingerprint's canonical JSON). Its body is a large body: it is read
 * in its turn, and while it is in flight V8 collects garbage sooner (src/limits/large-bodies.ts).
 */
export const LARGE_PLAN_BYTES = LARGE_BODY_BYTES;

/**
 * Large plans decided at once by one service. The others wait their turn, in arrival order:
 * nothing is refused and nothing is dropped, a submit only waits longer. It bounds what ten
 * clients submitting 1 MiB plans together hold at once (their copies, and the garbage they
 * leave for the next collection) to what two hold; small plans never wait. Over HTTP the
 * same number of large bodies is read at once (src/limits/large-bodies.ts); this limit also
 * holds the submits whose body was read without its turn: one that did not declare its
 * length, or one that waited past the longest wait.
 */
export const LARGE_PLANS_AT_ONCE = 2;
