/** Strings longer than this are cut in a tool's text (the whole value stays in structuredContent). */
const MAX_STRING = 200;
/** Arrays longer than this are cut in a tool's text. */
const MAX_ITEMS = 20;
/** The longest text a tool's output gets beside its structuredContent. */
export const MAX_BRIEF_CHARS = 4096;

/**
 * The text a tool's output gets beside its `structuredContent`: the same JSON with long
 * strings (a plan's content) and long lists cut and marked, at most MAX_BRIEF_CHARS in all.
 * A plan is sent once in full (in structuredContent), not twice: a client that shows the
 * text to a model shows what the call returned and where the rest is.
 */
export function brief(output: Record<string, unknown>): string {
  const text = JSON.stringify(output, (_key, value: unknown) => {
    if (typeof value === 'string' && value.length > MAX_STRING)
      return `${value.slice(0, MAX_STRING)}… (${value.length} characters; all of it in structuredContent)`;
    if (Array.isArray(value) && value.length > MAX_ITEMS) {
      const items = value as unknown[];
      return [
        ...items.slice(0, MAX_ITEMS),
        `… ${items.length - MAX_ITEMS} more in structuredContent`,
      ];
    }
    return value;
  });
  return text.length <= MAX_BRIEF_CHARS
    ? text
    : `${text.slice(0, MAX_BRIEF_CHARS)}… (cut; the whole output is in structuredContent)`;
}
