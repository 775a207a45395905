/**
 * The value of one Prometheus sample on the service's /metrics, 0 when it is absent:
 * `sample` is the name with its labels as printed, e.g. `planfence_decisions_total` or
 * `planfence_subscriptions_total{field="planPublished"}`.
 */
export async function metric(url: string, sample: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}
