/**
 * Scenario 11: Terraform plans (DESIGN §15). A 1 MiB `terraform show -json` document
 * submitted as TERRAFORM_PLAN_JSON (validated and summarised by the service, sensitive values
 * masked) against the very same bytes submitted as TEXT: the difference is the cost of
 * understanding the plan. And GET /health while such submits run beside it: parsing happens
 * before the decision, on the event loop, and must not hold other requests up noticeably.
 */
import type autocannon from 'autocannon';
import type { Template } from './http.js';

const SUBMIT = 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status } }';

/** Just under PLANFENCE_MAX_PLAN_BYTES' default (1 MiB). */
const TARGET_BYTES = 1_040_000;

/**
 * A plan of the shape Terraform writes: many resources updated, each with nested
 * attributes, tags and a password Terraform marks sensitive; a few created and replaced.
 */
function planDocument(): string {
  const changes: unknown[] = [];
  const plan = {
    format_version: '1.2',
    terraform_version: '1.11.4',
    variables: { region: { value: 'eu-west-1' } },
    resource_changes: changes,
    configuration: { root_module: { variables: { region: {} } } },
  };
  const resource = (i: number) => {
    const attributes = (version: number) => ({
      ami: `ami-0${(i * 7919 + version).toString(16).padStart(12, '0')}`,
      instance_type: version === 1 ? 't3.micro' : 't3.small',
      password: `secret-${i}-${version}`,
      tags: {
        Name: `web-${i}`,
        team: 'checkout',
        cost_center: `cc-${i % 17}`,
        version: String(version),
      },
      root_block_device: [{ volume_size: 20 + version, volume_type: 'gp3', encrypted: true }],
      network_interface: [
        {
          device_index: 0,
          subnet_id: `subnet-${(i % 3).toString(16)}`,
          security_groups: ['sg-1', 'sg-2'],
        },
      ],
    });
    const actions = i % 50 === 0 ? ['delete', 'create'] : i % 20 === 0 ? ['create'] : ['update'];
    return {
      address: `module.fleet.aws_instance.web[${i}]`,
      module_address: 'module.fleet',
      mode: 'managed',
      type: 'aws_instance',
      name: 'web',
      index: i,
      provider_name: 'registry.terraform.io/hashicorp/aws',
      change: {
        actions,
        before: actions[0] === 'create' ? null : attributes(1),
        after: attributes(2),
        after_unknown: { arn: true, id: true },
        before_sensitive: actions[0] === 'create' ? false : { password: true },
        after_sensitive: { password: true },
      },
    };
  };
  // Add resources in batches while the document stays under the target.
  for (let step = 512; step >= 1; step = Math.floor(step / 2)) {
    for (;;) {
      const from = changes.length;
      for (let i = from; i < from + step; i++) changes.push(resource(i));
      if (JSON.stringify(plan).length < TARGET_BYTES) continue;
      changes.length = from;
      break;
    }
  }
  return JSON.stringify(plan);
}

let document: string | null = null;
/** The 1 MiB document (built once). */
export function terraformDocument(): string {
  return (document ??= planDocument());
}

/** Submits of the 1 MiB document with fresh keys, as TEXT or as TERRAFORM_PLAN_JSON. */
export function bigSubmits(contentType: 'TEXT' | 'TERRAFORM_PLAN_JSON') {
  return (template: Template, runId: string): autocannon.Request[] => {
    // The content is escaped once; each request only adds its key.
    const content = JSON.stringify(terraformDocument());
    const prefix = `{"query":${JSON.stringify(SUBMIT)},"variables":{"input":{"environment":${JSON.stringify(
      template.environments[0],
    )},"generation":${template.fresh},"contentType":"${contentType}","content":${content},"idempotencyKey":"`;
    let n = 0;
    return [
      {
        method: 'POST',
        path: '/graphql',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${template.agentToken}`,
        },
        setupRequest: (request) => ({ ...request, body: `${prefix}${runId}-${++n}"}}}` }),
      },
    ];
  };
}

/** GET /health, the cheapest answer that still asks the database. */
export const health = (): autocannon.Request[] => [{ method: 'GET', path: '/health' }];

/** Lets 1 MiB submits through: the per-environment byte quota is 100 plans an hour by default. */
export const BIG_PLANS: Record<string, string> = {
  PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR: String(1024 ** 4),
};
