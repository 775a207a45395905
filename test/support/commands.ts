/**
 * Running programs from tests: the built `planfence` command line (dist/, built by
 * `npm test`) and `terraform`, whose suites are skipped where it is not on PATH.
 */
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The built command line. */
export const PLANFENCE_BIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Whether `terraform` runs here. */
export const hasTerraform = spawnSync('terraform', ['version'], { stdio: 'ignore' }).status === 0;

/** `describe` where terraform runs, else `describe.skip`. */
export const withTerraform = hasTerraform ? describe : describe.skip;

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `file` (terraform in automation mode) without blocking the service this process serves. */
export function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: { ...process.env, TF_IN_AUTOMATION: '1', ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}
