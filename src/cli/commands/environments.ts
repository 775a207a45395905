import { type Command, notFound, table } from '../command.js';

/** planfence env create */
export const createEnvironment: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'env create NAME [--mode MONOTONIC|STRICT] [--no-approval]');
  const env = await client.createEnvironment({
    name: rest[0],
    mode: (values.mode?.toUpperCase() ?? 'MONOTONIC') as never,
    requireApproval: !values['no-approval'],
  });
  print(
    env,
    () =>
      `created ${env.name} (${env.mode}, ${env.requireApproval ? 'approval required' : 'publishes on submit'})`,
  );
  return 0;
};

/** planfence env list */
export const listEnvironments: Command = async ({ client, print }) => {
  const envs = await client.environments();
  print(envs, () =>
    table(
      envs.map((e) => ({
        name: e.name,
        mode: e.mode,
        fence: e.fence,
        lastIssued: e.lastIssuedGeneration,
        holder: e.lease?.holder,
        generation: e.lease?.generation,
        expiresAt: e.lease?.expiresAt,
        current: e.currentPlan?.id,
      })),
    ),
  );
  return 0;
};

/** planfence env show */
export const showEnvironment: Command = async ({ client, rest, print, need }) => {
  need(1, 'env show NAME');
  const env = await client.environment(rest[0]);
  if (!env) throw notFound(`environment "${rest[0]}" does not exist`);
  print(env, () =>
    [
      `environment  ${env.name} (${env.mode}, ${env.requireApproval ? 'approval required' : 'publishes on submit'})`,
      `fence        ${env.fence}   last issued generation ${env.lastIssuedGeneration}`,
      `lease        ${env.lease ? `${env.lease.holder}, generation ${env.lease.generation}, until ${env.lease.expiresAt}` : 'none'}`,
      `deployments  ${env.deploymentSequence} started (the deployment sequence a new plan is made against)`,
      `current      ${env.currentPlan ? `${env.currentPlan.id} ${env.currentPlan.title ?? ''} by ${env.currentPlan.submittedBy}, approved by ${env.currentPlan.reviewedBy ?? '-'}` : 'none'}`,
    ].join('\n'),
  );
  return 0;
};
