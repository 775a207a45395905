import { AsyncLocalStorage } from 'node:async_hooks';

/** The door a request came through (AuditEvent.via). */
export type Via = 'graphql' | 'mcp';

const door = new AsyncLocalStorage<Via>();

/** Runs `work` as a request that came through `via`; decisions it starts record that door. */
export function throughDoor<T>(via: Via, work: () => T): T {
  return door.run(via, work);
}

/**
 * The door of the request this code runs for, or null (the service's own work). Read where a
 * decision starts, in the request's own async context: the SQLite group commit runs the
 * decision's statements in whichever request's context drains the group, so reading it
 * there would be wrong.
 */
export function currentVia(): Via | null {
  return door.getStore() ?? null;
}
