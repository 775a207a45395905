import type { Plan } from '../../client/client.js';
import { type Command, integer, table, UsageError } from '../command.js';

/** planfence audit */
export const audit: Command = async ({ client, verb, values, print }) => {
  if (!verb) throw new UsageError('usage: planfence audit ENV [--first N]');
  const events = await client.auditEvents(verb, {
    first: values.first ? integer(values.first, '--first') : undefined,
  });
  print(events, () =>
    table(
      events.map((e) => ({
        at: e.at,
        actor: e.actor,
        action: e.action,
        generation: e.generation,
        plan: e.planId,
        outcome: e.outcome,
        code: e.code,
      })),
    ),
  );
  return 0;
};

/** planfence current */
export const current: Command = async ({ client, verb, values, print }) => {
  if (!verb) throw new UsageError('usage: planfence current ENV [--watch]');
  const show = (plan: Plan | null) =>
    print(plan, () =>
      plan
        ? `${plan.id} ${plan.title ?? ''} by ${plan.submittedBy}, published ${plan.publishedAt}`
        : `nothing is published in ${verb}`,
    );
  let last = await client.currentPlan(verb);
  show(last);
  if (!values.watch) return 0;
  const every = values.interval ? integer(values.interval, '--interval') * 1000 : 2000;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, every));
    const now = await client.currentPlan(verb);
    if (now?.id !== last?.id) show(now);
    last = now;
  }
};
