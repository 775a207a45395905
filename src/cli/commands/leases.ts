import { type Command, integer } from '../command.js';

/** planfence lease acquire */
export const acquireLease: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'lease acquire ENV [--ttl SECONDS] [--instance LABEL]');
  const lease = await client.acquireLease(rest[0], {
    ttlSeconds: values.ttl ? integer(values.ttl, '--ttl') : undefined,
    instance: values.instance,
  });
  print(
    lease,
    () =>
      `generation ${lease.generation} on ${lease.environment} for ${lease.holder}, until ${lease.expiresAt}`,
  );
  return 0;
};

/** planfence lease renew */
export const renewLease: Command = async ({ client, rest, print, need, values }) => {
  need(2, 'lease renew ENV GENERATION [--ttl SECONDS]');
  const lease = await client.renewLease(
    rest[0],
    integer(rest[1], 'GENERATION'),
    values.ttl ? integer(values.ttl, '--ttl') : undefined,
  );
  print(
    lease,
    () => `generation ${lease.generation} on ${lease.environment} renewed until ${lease.expiresAt}`,
  );
  return 0;
};

/** planfence lease release */
export const releaseLease: Command = async ({ client, rest, print, need }) => {
  need(2, 'lease release ENV GENERATION');
  await client.releaseLease(rest[0], integer(rest[1], 'GENERATION'));
  print({ released: true }, () => `released generation ${rest[1]} on ${rest[0]}`);
  return 0;
};

/** How often `lease wait` says on stderr that it still waits. */
const PROGRESS_EVERY_MS = 5000;

/**
 * planfence lease wait: enqueue and wait for the grant (docs/leases.md). While it waits, one
 * line on stderr every 5 s: "waiting for the lease on prod: position 2, 35 s".
 */
export const waitForLease: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'lease wait ENV [--ttl SECONDS] [--instance LABEL] [--max-wait SECONDS]');
  let said = -Infinity;
  const lease = await client.waitForLease(rest[0], {
    ttlSeconds: values.ttl ? integer(values.ttl, '--ttl') : undefined,
    instance: values.instance,
    maxWaitSeconds: values['max-wait'] ? integer(values['max-wait'], '--max-wait') : undefined,
    onWait: (ticket, waitedMs) => {
      if (waitedMs - said < PROGRESS_EVERY_MS) return;
      said = waitedMs;
      process.stderr.write(
        `waiting for the lease on ${ticket.environment}: position ${ticket.position ?? '?'}, ${Math.round(waitedMs / 1000)} s\n`,
      );
    },
  });
  print(
    lease,
    () =>
      `generation ${lease.generation} on ${lease.environment} for ${lease.holder}, until ${lease.expiresAt}`,
  );
  return 0;
};

/** planfence lease cancel TICKET_ID: a lease ticket stops waiting (docs/leases.md). */
export const cancelLeaseTicket: Command = async ({ client, rest, print, need }) => {
  need(1, 'lease cancel TICKET_ID');
  const ticket = await client.cancelLeaseTicket(rest[0]);
  print(ticket, () => `lease ticket ${ticket.id} on ${ticket.environment} is ${ticket.status}`);
  return 0;
};
