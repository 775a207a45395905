/** How long a wait may see no progress before it fails. */
const STALL_MS = 30_000;
/** However much progress it sees, a wait ends by then. */
const LIMIT_MS = 10 * 60_000;

export interface UntilOptions {
  /**
   * Something that changes while the awaited work advances (e.g. how many deliveries arrived):
   * the wait fails only after `stallMs` without a change, so a slow machine is waited for and
   * a stuck one is not.
   */
  progress?: () => unknown;
  stallMs?: number;
}

/**
 * Polls `probe` until it gives a value (not undefined, null or false) and returns it; fails,
 * naming `what`, once nothing moved for `stallMs` (without `progress`: after `stallMs`).
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: UntilOptions = {},
): Promise<T> {
  const stallMs = options.stallMs ?? STALL_MS;
  const started = Date.now();
  let last = JSON.stringify(options.progress?.() ?? null);
  let moved = started;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    const now = Date.now();
    if (options.progress) {
      const seen = JSON.stringify(options.progress() ?? null);
      if (seen !== last) {
        last = seen;
        moved = now;
      }
    }
    if (now - moved > stallMs || now - started > LIMIT_MS)
      throw new Error(
        `timed out waiting for ${what} (${options.progress ? `no progress for ${stallMs} ms, last: ${last}` : `${stallMs} ms`})`,
      );
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
