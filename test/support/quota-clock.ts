import { QuotasService } from '../../src/quotas/quotas.service.js';
import type { TestApp } from './app.js';

/**
 * Holds the rate limits' clock of `app` still from now on (it moves only by `advance`):
 * what a burst may do is then judged by its count, not by how fast a loaded machine
 * answers it (at one request per second, a burst answered slowly earns tokens back).
 */
export function holdQuotaClock(app: TestApp): { advance(ms: number): void } {
  const quotas = app.get(QuotasService);
  let now = quotas.monotonic();
  quotas.monotonic = () => now;
  return {
    advance(ms: number) {
      now += ms;
    },
  };
}
