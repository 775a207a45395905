/**
 * Reads an issuer's JSON document (discovery, JWKS) within a time and a size bound: the
 * whole read, body included, stops at `timeoutMs`; a body beyond `maxBytes` (announced or
 * as it streams) is refused without being read further. No redirects.
 */
export async function fetchBounded(
  url: string,
  options: { timeoutMs: number; maxBytes: number; signal?: AbortSignal | null },
): Promise<Response> {
  const signals = [AbortSignal.timeout(options.timeoutMs)];
  if (options.signal) signals.push(options.signal);
  const signal = AbortSignal.any(signals);
  const response = await fetch(url, { signal, redirect: 'manual' });
  const announced = Number(response.headers.get('content-length') ?? NaN);
  const tooLarge = () =>
    new Error(`the document at ${url} is larger than ${options.maxBytes} bytes`);
  if (announced > options.maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body) {
    const reader = response.body.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > options.maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge();
      }
      chunks.push(value);
    }
  }
  const empty = [101, 204, 205, 304].includes(response.status);
  return new Response(empty ? null : Buffer.concat(chunks), {
    status: response.status,
    headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' },
  });
}
