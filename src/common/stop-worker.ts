import type { Worker } from 'node:worker_threads';

/**
 * Asks `worker` to stop (the message 'stop': it closes what it holds, and its thread ends),
 * and ends it after `graceMs` if it has not ended by then.
 */
export async function stopWorker(worker: Worker, graceMs: number): Promise<void> {
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.postMessage('stop');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    exited,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    }),
  ]);
  clearTimeout(timer);
  await worker.terminate();
}
