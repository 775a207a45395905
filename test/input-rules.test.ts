/**
 * An input is passed without class-validator's walk only when class-validator would pass it:
 * for every input class of the API, random inputs (valid and not) get the same verdict from
 * the rules gathered once (src/common/rules-at-once.ts) as from class-validator itself, and
 * the valid ones are known valid at once wherever the class's rules allow it.
 */
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import fc from 'fast-check';
import { IssueTokenArgs } from '../src/auth/dto/token.args.js';
import { ReportCheckInput } from '../src/checks/dto/report-check.input.js';
import { passesAtOnce } from '../src/common/rules-at-once.js';
import { validationPipe } from '../src/common/validation.js';
import {
  FinishDeploymentInput,
  StartDeploymentInput,
} from '../src/deployments/dto/deployment.input.js';
import { UpdateEnvironmentPolicyInput } from '../src/environments/dto/policy.inputs.js';
import { AcquireLeaseInput, ReleaseLeaseInput } from '../src/leases/dto/lease.inputs.js';
import {
  ApprovePlanInput,
  RejectPlanInput,
  SubmitPlanInput,
} from '../src/plans/dto/plan.inputs.js';

/** The options the service's pipe validates with. */
const OPTIONS = { forbidUnknownValues: false, validationError: { target: false } };

/** Values a field may be sent with: right for some field, wrong for others. */
const VALUES = [
  undefined,
  null,
  '',
  'prod',
  'Prod',
  'a-b.c_d',
  'prod@1.1',
  'prod@0.1',
  'prod@2147483648.1',
  'x'.repeat(255),
  'x'.repeat(256),
  'TEXT',
  'TERRAFORM_PLAN_JSON',
  'MONOTONIC',
  'AGENT',
  'SUCCEEDED',
  ['a', 'b'],
  [{ count: 1 }],
  { from: 'staging' },
  'SUCCESS',
  '12',
  '0',
  0,
  1,
  7,
  3600,
  3601,
  2 ** 31 - 1,
  2 ** 31,
  -1,
  1.5,
  Number.NaN,
  true,
  {},
  [],
];

/**
 * Inputs of a class: each field of `valid` (a valid input) kept, mostly, or else given a value
 * from VALUES or any short string; and sometimes a field the class does not have.
 */
function inputs(valid: Record<string, unknown>) {
  const other = fc.oneof(fc.constantFrom(...VALUES), fc.string({ maxLength: 8 }));
  return fc.record(
    {
      ...Object.fromEntries(
        Object.entries(valid).map(([field, value]) => [
          field,
          fc.oneof({ arbitrary: fc.constant(value), weight: 6 }, { arbitrary: other, weight: 1 }),
        ]),
      ),
      unknownField: other,
    },
    { requiredKeys: [] },
  );
}

const PLAN = 'prod@1.1';
const HASH = 'a'.repeat(64);

/**
 * Each class, whether its rules are run at once (not for nested inputs nor rules applied to
 * `each` item of a list), and a valid input.
 */
const CLASSES: [string, new () => object, boolean, Record<string, unknown>][] = [
  [
    'SubmitPlanInput',
    SubmitPlanInput,
    true,
    {
      environment: 'prod',
      generation: 1,
      idempotencyKey: 'k',
      content: 'c',
      title: 't',
      basedOnPlanId: PLAN,
      contentType: 'TEXT',
      artifact: 'YQ==',
      basedOnDeploymentSequence: 0,
      sourceRevision: 'abc',
    },
  ],
  [
    'ApprovePlanInput',
    ApprovePlanInput,
    true,
    {
      planId: PLAN,
      contentHash: HASH,
      deploymentSequence: 2,
      idempotencyKey: 'k',
      breakGlassReason: 'r',
    },
  ],
  ['RejectPlanInput', RejectPlanInput, true, { planId: PLAN, reason: 'no', idempotencyKey: 'k' }],
  [
    'AcquireLeaseInput',
    AcquireLeaseInput,
    true,
    { environment: 'prod', ttlSeconds: 60, instance: 'i' },
  ],
  ['ReleaseLeaseInput', ReleaseLeaseInput, true, { environment: 'prod', generation: 7 }],
  [
    'ReportCheckInput',
    ReportCheckInput,
    true,
    {
      planId: PLAN,
      name: 'ci',
      status: 'SUCCESS',
      summary: 's',
      detailsUrl: 'https://ci.example/1',
    },
  ],
  [
    'IssueTokenArgs',
    IssueTokenArgs,
    false,
    {
      name: 'bot',
      role: 'AGENT',
      groups: ['a', 'b'],
      environments: ['prod'],
      expiresInSeconds: 60,
    },
  ],
  [
    'StartDeploymentInput',
    StartDeploymentInput,
    true,
    { environment: 'prod', planId: PLAN, idempotencyKey: 'k', heartbeatSeconds: 60 },
  ],
  [
    'FinishDeploymentInput',
    FinishDeploymentInput,
    false,
    { deploymentId: 'prod#12', outcome: 'SUCCEEDED', detail: 'd', idempotencyKey: 'k' },
  ],
  [
    'UpdateEnvironmentPolicyInput',
    UpdateEnvironmentPolicyInput,
    false,
    { environment: 'prod', promotion: { from: 'staging', soakMinutes: 0 } },
  ],
];

describe.each(CLASSES)('%s', (_name, type, atOnce, valid) => {
  it('is passed at once only where class-validator passes it', async () => {
    let passed = 0;
    let passes = 0;
    await fc.assert(
      fc.asyncProperty(inputs(valid), async (plain) => {
        const input = plainToInstance(type, plain);
        const errors = await validate(input, OPTIONS);
        const known = passesAtOnce(input, OPTIONS);
        if (known) passed++;
        if (errors.length === 0) passes++;
        // Never passed when class-validator finds an error.
        if (known) expect(errors).toEqual([]);
      }),
      { numRuns: Number(process.env.FC_RUNS ?? 300) },
    );
    expect(passes).toBeGreaterThan(0);
    // A flat class's valid inputs are all known valid at once; a nested one's never.
    expect(passed).toBe(atOnce ? passes : 0);
  });
});

it('runs the rules of flat inputs at once, and leaves nested ones to class-validator', () => {
  const submit = plainToInstance(SubmitPlanInput, {
    environment: 'prod',
    generation: 1,
    idempotencyKey: 'k',
    content: 'c',
    contentType: 'TEXT',
  });
  expect(passesAtOnce(submit, OPTIONS)).toBe(true);
  expect(passesAtOnce(Object.assign(submit, { generation: 0 }), OPTIONS)).toBe(false);
  // An option that changes which rules apply leaves every class to class-validator.
  expect(passesAtOnce(Object.assign(submit, { generation: 1 }), { whitelist: true })).toBe(false);
  // A nested input's rules are class-validator's.
  const policy = plainToInstance(UpdateEnvironmentPolicyInput, {
    environment: 'prod',
    promotion: { from: 'staging' },
  });
  expect(passesAtOnce(policy, OPTIONS)).toBe(false);
});

it("is what the service's pipe uses: errors are class-validator's, valid inputs pass", async () => {
  const metadata = { type: 'body' as const, metatype: SubmitPlanInput, data: 'input' };
  const ok = {
    environment: 'prod',
    generation: 3,
    idempotencyKey: 'k',
    content: 'c',
    contentType: 'TEXT',
  };
  await expect(validationPipe.transform(ok, metadata)).resolves.toBeInstanceOf(SubmitPlanInput);
  await expect(
    validationPipe.transform({ ...ok, environment: 'Prod', generation: 0 }, metadata),
  ).rejects.toMatchObject({
    code: 'BAD_USER_INPUT',
    message:
      'environment must match ^[a-z0-9][a-z0-9._-]{0,62}$; generation must be a generation (1 to 2147483647)',
  });
});
