/**
 * The value of one Prometheus sample on the service's /metrics, 0 when it is absent (or, with
 * `required`, a failed test): `sample` is the name with its labels as printed, e.g.
 * `planfence_decisions_total` or `planfence_subscriptions_total{field="planPublished"}`.
 */
export async function metric(
  url: string,
  sample: string,
  { required = false } = {},
): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  if (required) expect(line).toBeDefined();
  return line ? Number(line.slice(sample.length + 1)) : 0;
}
