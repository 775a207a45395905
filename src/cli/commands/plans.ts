import {
  type Command,
  integer,
  notFound,
  pending,
  planRow,
  readInput,
  table,
  UsageError,
} from '../command.js';
import { counts, submitTerraformPlan } from './terraform.js';

/** planfence plan submit */
export const submitPlan: Command = async ({ client, rest, values, print, need }) => {
  if (values.terraform !== undefined) {
    need(1, 'plan submit ENV --terraform PLANFILE [--chdir DIR] [--generation G]');
    const plan = await submitTerraformPlan(client, rest[0], {
      planFile: values.terraform,
      chdir: values.chdir,
      generation:
        values.generation !== undefined ? integer(values.generation, '--generation') : undefined,
      deploymentSequence:
        values['deployment-sequence'] !== undefined
          ? integer(values['deployment-sequence'], '--deployment-sequence')
          : undefined,
      sourceRevision: values['source-revision'],
      title: values.title,
      idempotencyKey: values.key,
    });
    const bound = [
      plan.priorState ? `prior state serial ${plan.priorState.serial}` : 'no prior state',
      ...(plan.basedOnDeploymentSequence !== null
        ? [`deployment sequence ${plan.basedOnDeploymentSequence}`]
        : []),
    ];
    print(
      plan,
      () =>
        `${plan.id} ${plan.status} (sha256 ${plan.contentHash}, plan file sha256 ${plan.artifactHash}, ${bound.join(', ')})\n${counts(plan.summary)}`,
    );
    return 0;
  }
  need(2, 'plan submit ENV GENERATION --file PATH|-');
  if (!values.file)
    throw new UsageError('plan submit needs --file PATH (or --file - for standard input)');
  const content = readInput(values.file, 'plan file');
  const plan = await client.submitPlan({
    environment: rest[0],
    generation: integer(rest[1], 'GENERATION'),
    content,
    title: values.title,
    basedOnPlanId: values['based-on'],
    idempotencyKey: values.key,
  });
  print(plan, () => `${plan.id} ${plan.status} (sha256 ${plan.contentHash})`);
  return 0;
};

/** planfence plan approve [--break-glass REASON] */
export const approvePlan: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'plan approve PLAN_ID [--hash SHA256] [--break-glass REASON]');
  const plan = await client.review(rest[0], {
    contentHash: values.hash,
    breakGlassReason: values['break-glass'],
  });
  print(plan, () =>
    plan.status === 'PUBLISHED'
      ? `${plan.id} PUBLISHED, approved by ${plan.reviewedBy}${values['break-glass'] ? ' (break-glass)' : ''}`
      : `${plan.id} ${plan.status}: approval recorded; still needed: ${pending(plan.pendingApprovalRules)}`,
  );
  return 0;
};

/** planfence plan reject */
export const rejectPlan: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'plan reject PLAN_ID --reason TEXT');
  if (!values.reason) throw new UsageError('plan reject needs --reason TEXT');
  const plan = await client.rejectPlan(rest[0], values.reason);
  print(plan, () => `${plan.id} ${plan.status}: ${plan.rejectionReason}`);
  return 0;
};

/**
 * planfence plan show: the plan and its review. `--json` prints every field of the contract's
 * Plan (summary, prior state, approvals, checks, review URL, ...); the plan file (`artifact`)
 * only with `--artifact`, which the service answers to DEPLOYER and ADMIN only (R54).
 */
export const showPlan: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'plan show PLAN_ID [--artifact]');
  const plan = await client.planInFull(rest[0], { artifact: values.artifact });
  if (!plan) throw notFound(`plan ${rest[0]} does not exist`);
  print(plan, () => {
    const lines = [
      table([planRow(plan)]),
      '',
      `content sha256 ${plan.contentHash} (plan approve ${plan.id} --hash ${plan.contentHash})`,
      `review: ${plan.reviewUrl}`,
    ];
    if (plan.status === 'PROPOSED')
      lines.push(
        `still needed: approvals ${pending(plan.pendingApprovalRules)}` +
          (plan.pendingChecks?.length ? `; checks ${plan.pendingChecks.join(', ')}` : ''),
      );
    if (plan.contentType === 'TERRAFORM_PLAN_JSON') {
      lines.push(
        `plan file sha256 ${plan.artifactHash ?? '-'}` +
          (plan.priorState ? `, prior state serial ${plan.priorState.serial}` : '') +
          (plan.basedOnDeploymentSequence !== null
            ? `, deployment sequence ${plan.basedOnDeploymentSequence}`
            : ''),
        '',
        counts(plan.summary),
        ...(plan.summary?.resourceChanges ?? []).map(
          (change) => `  ${change.actions.join(',').padEnd(13)} ${change.address}`,
        ),
        ...(plan.summary?.provisioners ?? []).map(
          (p) =>
            `  provisioner   ${p.address} ${p.type}${p.type === 'local-exec' ? ' (runs on the applier)' : ''}: ${p.command ?? '(computed when applied)'}`,
        ),
        '',
        `(the document: planfence plan show ${plan.id} --json | jq -r .content)`,
      );
    } else {
      lines.push('', plan.content);
    }
    return lines.join('\n');
  });
  return 0;
};

/** planfence plan list */
export const listPlans: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'plan list ENV [--status STATUS] [--first N]');
  const plans = await client.plans(rest[0], {
    status: values.status?.toUpperCase() as never,
    first: values.first ? integer(values.first, '--first') : undefined,
  });
  print(plans, () => table(plans.map(planRow)));
  return 0;
};
