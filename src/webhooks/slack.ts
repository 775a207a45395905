import type { StoredEvent } from '../outbox/outbox-event.js';

/** Text as Slack shows it: one line, at most `max` characters, `&`, `<` and `>` escaped (no mentions or links injected by a title). */
function plain(value: unknown, max = 200): string {
  const text = (typeof value === 'string' || typeof value === 'number' ? String(value) : '')
    .replace(/\s+/g, ' ')
    .trim();
  const cut = text.length > max ? `${text.slice(0, max - 1)}…` : text;
  return cut.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * The one line a person reads in a Slack channel for an event, e.g.
 * `planfence · prod: plan prod@4.2 published by alice (generation 4)`.
 */
export function slackText(event: StoredEvent): string {
  const data = (event.data ?? {}) as Record<string, unknown>;
  const by = event.actor ? ` by ${plain(event.actor, 100)}` : '';
  const plan = plain(event.planId ?? '?');
  const title = data.title ? ` "${plain(data.title, 120)}"` : '';
  const generation = event.generation != null ? ` (generation ${event.generation})` : '';
  const deployment = `deployment ${plain(data.id ?? `${event.environment}#${event.deploymentSequence}`)}`;
  let line: string;
  switch (event.type) {
    case 'plan.submitted':
      line = `plan ${plan}${title} submitted${by}${generation}`;
      break;
    case 'plan.published':
      line = `plan ${plan}${title} published${by}${generation}`;
      break;
    case 'plan.rejected':
      line = `plan ${plan}${title} rejected${by}${data.rejectionReason ? `: ${plain(data.rejectionReason)}` : ''}`;
      break;
    case 'plan.expired':
      line = `plan ${plan}${title} expired without a decision`;
      break;
    case 'deployment.started':
      line = `${deployment} of plan ${plan} started${by}`;
      break;
    case 'deployment.finished':
      line = `${deployment} of plan ${plan} finished: ${plain(data.status)}${by}`;
      break;
    case 'deployment.unknown':
      line = `${deployment} of plan ${plan} is UNKNOWN: its heartbeat lapsed before a report`;
      break;
    case 'deployment.reconciled':
      line = `${deployment} of plan ${plan} reconciled as ${plain(data.status)}${by}`;
      break;
    case 'environment.frozen':
      line = `frozen${by}${data.frozenReason ? `: ${plain(data.frozenReason)}` : ''}`;
      break;
    case 'environment.unfrozen':
      line = `unfrozen${by}`;
      break;
    case 'lease.granted':
      line = `lease granted to ${plain(data.holder, 100)} from the queue${generation}`;
      break;
    case 'lease.superseded':
      line = `lease ticket of ${plain(data.holder, 100)} superseded by a newer one${by}`;
      break;
    default:
      line = plain(event.type);
  }
  return `planfence · ${plain(event.environment, 63)}: ${line}`;
}
