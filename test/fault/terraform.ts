/**
 * The real `terraform` for the pause harness's state rounds (R56, R57): a working directory
 * with one built-in resource (`terraform_data`, whose input is whoever planned it) and the
 * local backend, so that it runs offline in a fraction of a second. Used by the harness (the
 * agent that is not paused, the deployer) and by the paused agent process alike.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The Terraform state as `terraform state pull` gives it: what R56 compares. */
export interface PulledState {
  lineage: string;
  serial: number;
  /** The input of `terraform_data.owner`: who planned what was applied last (null: nothing). */
  owner: string | null;
}

const CONFIG = `variable "who" { type = string }
resource "terraform_data" "owner" { input = var.who }
`;

/** Whether `terraform` runs here (the state rounds are skipped where it does not). */
export function terraformOnPath(): boolean {
  return spawnSync('terraform', ['version'], { stdio: 'ignore' }).status === 0;
}

/** Runs terraform in `dir`; its stdout, or an error with its stderr. */
export function terraform(dir: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'terraform',
      [`-chdir=${dir}`, ...args],
      {
        env: { ...process.env, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1' },
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`terraform ${args[0]} in ${dir}: ${stderr || error.message}`))
          : resolve(stdout),
    );
  });
}

/** Writes the configuration into `dir` and applies it once: the state every plan starts from. */
export async function prepareWorkspace(dir: string): Promise<PulledState> {
  writeFileSync(join(dir, 'main.tf'), CONFIG);
  await terraform(dir, 'apply', '-input=false', '-no-color', '-auto-approve', '-var=who=nobody');
  return pullState(dir);
}

/**
 * `terraform plan -out` as `who` from the state as it is now, then `terraform show -json` of
 * the plan file: the content and the artifact (base64 of the plan file) a submit sends.
 */
export async function planAs(
  dir: string,
  who: string,
): Promise<{ file: string; content: string; artifact: string }> {
  const file = join(dir, `${who}.tfplan`);
  await terraform(dir, 'plan', '-input=false', '-no-color', `-var=who=${who}`, `-out=${file}`);
  const content = await terraform(dir, 'show', '-json', '-no-color', file);
  return { file, content, artifact: readFileSync(file).toString('base64') };
}

/** `terraform apply PLANFILE` of a plan file given as base64 (the artifact the service hands out). */
export async function applyArtifact(dir: string, artifact: string, name: string): Promise<void> {
  const file = join(dir, `${name}.tfplan`);
  writeFileSync(file, Buffer.from(artifact, 'base64'));
  await terraform(dir, 'apply', '-input=false', '-no-color', file);
}

/** `terraform state pull`: lineage, serial and what the resource holds. */
export async function pullState(dir: string): Promise<PulledState> {
  const state = JSON.parse(await terraform(dir, 'state', 'pull')) as {
    lineage: string;
    serial: number;
    resources: { name: string; instances: { attributes: { input: { value: string } } }[] }[];
  };
  // terraform_data keeps its input as a dynamic value: {type, value}.
  const owner = state.resources.find((r) => r.name === 'owner')?.instances[0]?.attributes.input;
  return { lineage: state.lineage, serial: state.serial, owner: owner?.value ?? null };
}
