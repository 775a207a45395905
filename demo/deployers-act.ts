/**
 * The demo's second act: the paused deployer. Deployer D1 starts deploying the published
 * plan and is frozen with SIGSTOP before it applies it; its heartbeat lapses and the
 * deployment reads UNKNOWN, which blocks every other start. A reviewer reconciles it FAILED;
 * a newer plan is published and D2 deploys it. D1 is thawed: its late write is refused by the
 * destination (which applies only a higher sequence than the last) or it stops first when
 * its heartbeat is refused, and its report is refused by planfence. The destination never
 * goes back.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeployerProcess } from '../test/fault/deployers.js';
import { ADMIN_TOKEN, type ServiceProcess } from '../test/fault/service.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Plays the act; returns the number of outcomes that differ from docs/design.md §10. */
export async function deployersAct(
  service: ServiceProcess,
  dir: string,
  say: (who: string, text: string) => void,
): Promise<number> {
  const deviations: string[] = [];
  const expect = (what: string, ok: boolean) => {
    if (!ok) deviations.push(what);
  };
  const agent = await service.issueToken('agent-p', 'AGENT');
  const d1 = await service.issueToken('deployer-1', 'DEPLOYER');
  const d2 = await service.issueToken('deployer-2', 'DEPLOYER');
  const reviewer = await service.issueToken('reviewer-r', 'REVIEWER');
  const environment = 'shop';
  const destination = join(dir, 'shop-applied.json');
  const applied = () => {
    try {
      return JSON.parse(readFileSync(destination, 'utf8')) as { sequence: number; planId: string };
    } catch {
      return null;
    }
  };
  const deploymentOf = async (id: string) =>
    (
      await service.ok<{ deployment: { status: string; reconciledBy: string | null } }>(
        ADMIN_TOKEN,
        'query($id: ID!) { deployment(id: $id) { status reconciledBy } }',
        { id },
      )
    ).deployment;
  const publish = async (content: string) => {
    const { acquireLease } = await service.ok<{ acquireLease: { generation: number } }>(
      agent,
      `mutation { acquireLease(input: { environment: "${environment}" }) { generation } }`,
    );
    const { submitPlan } = await service.ok<{ submitPlan: { id: string } }>(
      agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
      {
        input: {
          environment,
          generation: acquireLease.generation,
          content,
          idempotencyKey: `demo-${content}`,
        },
      },
    );
    await service.ok(
      agent,
      `mutation { releaseLease(input: { environment: "${environment}", generation: ${acquireLease.generation} }) }`,
    );
    say('agent', `published ${submitPlan.id}: "${content}"`);
    return submitPlan.id;
  };

  console.log(
    '\nSecond act: the paused deployer. A deployment is the hard effect; its sequence is the token the destination checks.\n',
  );
  await service.ok(
    ADMIN_TOKEN,
    `mutation { createEnvironment(input: { name: "${environment}", requireApproval: false }) { name } }`,
  );
  const planA = await publish('web: 3 replicas');

  const first = new DeployerProcess(service.url, d1, environment, destination);
  const deployers = [first];
  try {
    const started = await first.until('started');
    const id = `${environment}#${started.sequence}`;
    say('D1', `started ${id} deploying ${planA} with sequence ${started.sequence}`);
    first.freeze();
    say('demo', 'froze D1 with SIGSTOP before it applied anything (5 s heartbeat)');
    const frozenAt = Date.now();
    while ((await deploymentOf(id)).status !== 'UNKNOWN' && Date.now() - frozenAt < 30_000)
      await sleep(250);
    const unknown = await deploymentOf(id);
    say('viewer', `${id} reads ${unknown.status}: nobody knows whether it applied`);
    expect('the lapsed deployment reads UNKNOWN', unknown.status === 'UNKNOWN');

    const blocked = await service.gql(
      d2,
      'mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { id } }',
      { input: { environment, planId: planA, idempotencyKey: 'demo-d2-early' } },
    );
    const blockedCode = blocked.errors?.[0]?.extensions.code as string | undefined;
    say('D2', `tries to start: ${blockedCode ?? 'accepted'}`);
    expect('no start while a deployment is UNKNOWN', blockedCode === 'DEPLOYMENT_ACTIVE');

    await service.ok(
      reviewer,
      'mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { id } }',
      { input: { deploymentId: id, outcome: 'FAILED', note: 'D1 unreachable; nothing applied' } },
    );
    say('reviewer', `reconciled ${id} FAILED: "D1 unreachable; nothing applied"`);

    const planB = await publish('web: 5 replicas');
    const second = new DeployerProcess(service.url, d2, environment, destination);
    deployers.push(second);
    const secondResult = await second.until('result');
    const afterD2 = applied();
    say(
      'D2',
      `deployed ${planB}: ${secondResult.code}; destination holds ${afterD2?.planId} at sequence ${afterD2?.sequence}`,
    );
    expect('D2 deploys the newer plan', secondResult.code === 'OK' && afterD2?.planId === planB);

    first.thaw();
    say('demo', 'thawed D1; it carries on with sequence 1');
    const late = await first.until('result');
    say(
      'D1',
      late.code === 'DESTINATION_REFUSED'
        ? 'its write was refused by the destination (sequence 1 is not above 2), and its report by planfence'
        : `its report was refused: ${late.code}`,
    );
    expect(
      "D1's late report is refused",
      late.code === 'DEPLOYMENT_NOT_ACTIVE' || late.code === 'DESTINATION_REFUSED',
    );
    const final = applied();
    say(
      'viewer',
      `destination holds ${final?.planId} at sequence ${final?.sequence}; ${id} reads ${(await deploymentOf(id)).status}`,
    );
    expect('the destination never goes back', final?.planId === planB && final.sequence === 2);
  } finally {
    for (const deployer of deployers) deployer.kill();
  }
  console.log(
    deviations.length
      ? `\n${deviations.length} deployment outcome(s) differ from docs/design.md: ${deviations.join('; ')}.`
      : '\nEvery deployment outcome is the one docs/design.md promises.',
  );
  return deviations.length;
}
