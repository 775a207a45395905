/**
 * Options of a loader (dataloader) that reads together what the fields of a list ask for:
 * everything asked until the event loop turns (from one request or several), at most a
 * large page at a time, one statement for all. Nothing is cached: each read sees what is
 * committed when its statement runs, as a read of one row always did (docs/scaling.md).
 */
export const READ_TOGETHER = {
  cache: false,
  batchScheduleFn: (read: () => void) => setImmediate(read),
  maxBatchSize: 1000,
};
