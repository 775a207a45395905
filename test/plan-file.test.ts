/**
 * readPriorState (DESIGN R56): the lineage and serial of the state a plan file was computed
 * from. Real plan files made by the real `terraform` (skipped where it is not on PATH: a
 * working directory with only terraform_data and the local backend), and archives crafted
 * here, byte by byte, to be what terraform never writes: not a zip, zip bombs, lying sizes,
 * states that are not states.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateRawSync } from 'node:zlib';
import yauzl from 'yauzl';
import {
  DEFAULT_MAX_STATE_BYTES,
  MAX_PLAN_FILE_ENTRIES,
  readPriorState,
  type TerraformStateRef,
} from '../src/terraform/plan-file.js';
import { TerraformPlanError } from '../src/terraform/terraform.errors.js';
import { LINEAGE, planFile, state, zip } from './support/plan-file.js';
import { withTerraform } from './support/commands.js';

/** The TerraformPlanError readPriorState refuses this archive with. */
async function refusal(
  archive: Buffer,
  limits?: { maxEntryBytes?: number },
): Promise<TerraformPlanError> {
  const error = await readPriorState(archive, limits).then(
    (ref) => {
      throw new Error(`accepted: ${JSON.stringify(ref)}`);
    },
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(TerraformPlanError);
  expect((error as TerraformPlanError).code).toBe('BAD_USER_INPUT');
  return error as TerraformPlanError;
}

describe('readPriorState of crafted archives', () => {
  it('reads lineage and serial of a deflated or a stored tfstate entry', async () => {
    const expected: TerraformStateRef = { lineage: LINEAGE, serial: 3 };
    expect(await readPriorState(planFile({ data: state() }))).toEqual(expected);
    expect(await readPriorState(planFile({ data: state(), method: 0 }))).toEqual(expected);
    expect(await readPriorState(planFile({ data: state({ serial: 0 }) }))).toEqual({
      lineage: LINEAGE,
      serial: 0,
    });
  });

  it('refuses an archive without a tfstate entry; reads a state with an empty lineage as it is', async () => {
    for (const archive of [
      planFile(null),
      zip([]),
      // A tfstate entry somewhere else is not the plan's prior state.
      planFile(null, { name: 'tfconfig/tfstate', data: state() }),
    ]) {
      expect((await refusal(archive)).message).toMatch(/no tfstate entry/);
    }
    expect(await readPriorState(planFile({ data: state({ lineage: '', serial: 0 }) }))).toEqual({
      lineage: '',
      serial: 0,
    });
  });

  it('refuses what is not a zip archive', async () => {
    for (const bytes of [
      Buffer.alloc(0),
      Buffer.from('not a zip'),
      Buffer.from(state()),
      // A zip cut short: its end record is gone.
      planFile({ data: state() }).subarray(0, 100),
    ]) {
      expect((await refusal(bytes)).message).toMatch(/^the plan file is not a zip archive/);
    }
  });

  it('refuses a malformed archive: a bad central directory, an unsafe entry name', async () => {
    const archive = planFile({ data: state() });
    // The end record points its central directory at the first local header.
    archive.writeUInt32LE(0, archive.length - 6);
    expect((await refusal(archive)).message).toMatch(
      /^the plan file is not a valid zip archive: invalid central directory file header signature/,
    );
    expect(
      (await refusal(planFile({ data: state() }, { name: '../escape', data: 'x' }))).message,
    ).toMatch(/^the plan file is not a valid zip archive: invalid relative path/);
  });

  it(`refuses more than ${MAX_PLAN_FILE_ENTRIES} entries, before reading them`, async () => {
    const many = Array.from({ length: MAX_PLAN_FILE_ENTRIES - 4 }, (_, i) => ({
      name: `tfconfig/m-/${i}.tf`,
      data: '',
      method: 0,
    }));
    // A plan file with the most entries accepted is read.
    expect(await readPriorState(planFile({ data: state() }, ...many))).toEqual({
      lineage: LINEAGE,
      serial: 3,
    });
    const tooMany = planFile({ data: state() }, ...many, { name: 'one-more', data: '' });
    expect((await refusal(tooMany)).message).toBe(
      `the plan file declares ${MAX_PLAN_FILE_ENTRIES + 1} entries; at most ${MAX_PLAN_FILE_ENTRIES} are read`,
    );
  });

  it('refuses two tfstate entries', async () => {
    const archive = planFile({ data: state() }, { name: 'tfstate', data: state({ serial: 9 }) });
    expect((await refusal(archive)).message).toBe('the plan file has more than one tfstate entry');
  });

  it('refuses a tfstate entry declaring more than the limit: 16 MiB, or as given', async () => {
    expect(DEFAULT_MAX_STATE_BYTES).toBe(16 * 1024 * 1024);
    // 17 MiB of zeros deflate to about 17 KiB: under 64:1 it is not, but the limit comes first.
    const big = Buffer.alloc(DEFAULT_MAX_STATE_BYTES + 1024 * 1024);
    expect((await refusal(planFile({ data: big }))).message).toBe(
      `the tfstate entry of the plan file declares ${big.length} bytes; at most ${DEFAULT_MAX_STATE_BYTES} are read`,
    );
    const document = state();
    expect(
      (await refusal(planFile({ data: document }), { maxEntryBytes: document.length - 1 })).message,
    ).toBe(
      `the tfstate entry of the plan file declares ${document.length} bytes; at most ${document.length - 1} are read`,
    );
    expect(
      await readPriorState(planFile({ data: document }), { maxEntryBytes: document.length }),
    ).toEqual({ lineage: LINEAGE, serial: 3 });
  });

  it('refuses a zip bomb: more than 64 times its compressed size, under the limit', async () => {
    // 1 MiB of a state padded with spaces deflates to about 1 KiB.
    const padded = state({ pad: ' '.repeat(1024 * 1024) });
    const compressed = deflateRawSync(Buffer.from(padded)).length;
    expect((await refusal(planFile({ data: padded }))).message).toBe(
      `the tfstate entry of the plan file declares ${padded.length} bytes from ${compressed} compressed ` +
        '(more than 64 times: a zip bomb)',
    );
  });

  it('refuses a tfstate entry that inflates to more or fewer bytes than it declares', async () => {
    // A bomb that lies: 17 MiB of zeros declaring 1,000 bytes (17 KiB compressed: a sane ratio).
    const bomb = Buffer.alloc(DEFAULT_MAX_STATE_BYTES + 1024 * 1024);
    expect((await refusal(planFile({ data: bomb, declaredSize: 1000 }))).message).toBe(
      'the tfstate entry of the plan file inflates to more than the 1000 bytes it declares',
    );
    const document = state();
    expect(
      (await refusal(planFile({ data: document, declaredSize: document.length - 1 }))).message,
    ).toBe(
      `the tfstate entry of the plan file inflates to more than the ${document.length - 1} bytes it declares`,
    );
    expect(
      (await refusal(planFile({ data: document, declaredSize: document.length + 1 }))).message,
    ).toBe(
      `the tfstate entry of the plan file inflates to fewer than the ${document.length + 1} bytes it declares`,
    );
    // A stored entry whose two sizes disagree is refused by the archive's reader.
    expect(
      (await refusal(planFile({ data: document, method: 0, declaredSize: document.length + 1 })))
        .message,
    ).toMatch(/^the plan file is not a valid zip archive: compressed\/uncompressed size mismatch/);
  });

  it('refuses a tfstate entry whose CRC-32 does not match, or that is not deflate data', async () => {
    const document = state();
    expect(
      (await refusal(planFile({ data: document, crc: (crc32(document) + 1) >>> 0 }))).message,
    ).toBe('the tfstate entry of the plan file does not match its CRC-32 (a damaged archive)');
    // Stored bytes declared deflated: 0xff is no valid deflate block.
    const garbage = Buffer.alloc(64, 0xff);
    const archive = zip([{ name: 'tfstate', data: garbage, method: 0 }]);
    archive.writeUInt16LE(8, 8); // local header: deflated
    archive.writeUInt16LE(8, 30 + 'tfstate'.length + garbage.length + 10); // central header
    expect((await refusal(archive)).message).toMatch(
      /^the tfstate entry of the plan file cannot be read: /,
    );
  });

  it('refuses an unsupported compression method or an encrypted entry', async () => {
    // 12: bzip2, which Terraform never writes.
    expect((await refusal(planFile({ data: state(), method: 12 }))).message).toBe(
      'the tfstate entry of the plan file uses unsupported compression method 12 (stored and deflated are read)',
    );
    expect((await refusal(planFile({ data: state(), flags: 0x1 }))).message).toBe(
      'the tfstate entry of the plan file is encrypted',
    );
  });

  it('refuses a tfstate that is not JSON, not an object, or not UTF-8', async () => {
    for (const data of ['{"lineage": ', '', 'lineage = "x"']) {
      expect((await refusal(planFile({ data }))).message).toMatch(
        /^the tfstate entry of the plan file is not a JSON state: /,
      );
    }
    expect((await refusal(planFile({ data: Buffer.from([0x7b, 0xff, 0x7d]) }))).message).toMatch(
      /^the tfstate entry of the plan file is not a JSON state: /,
    );
    for (const data of ['[]', 'null', '3', '"state"']) {
      expect((await refusal(planFile({ data }))).message).toBe(
        'the tfstate entry of the plan file is not a JSON object (a Terraform state)',
      );
    }
  });

  it('refuses a state without a string lineage', async () => {
    for (const lineage of [undefined, null, 42, [LINEAGE], { id: LINEAGE }]) {
      expect((await refusal(planFile({ data: state({ lineage }) }))).message).toBe(
        'the tfstate entry of the plan file has no string lineage',
      );
    }
    expect((await refusal(planFile({ data: state({ lineage: 'x'.repeat(65) }) }))).message).toBe(
      'the tfstate entry of the plan file has a lineage of 65 characters; at most 64 are accepted',
    );
  });

  it('refuses a state without a non-negative integer serial', async () => {
    for (const serial of [undefined, null, '3', -1, 1.5, 2 ** 53, true]) {
      expect((await refusal(planFile({ data: state({ serial }) }))).message).toBe(
        'the tfstate entry of the plan file has no non-negative integer serial',
      );
    }
    // Even with an empty lineage: what terraform writes there is serial 0.
    expect((await refusal(planFile({ data: state({ lineage: '', serial: -1 }) }))).message).toBe(
      'the tfstate entry of the plan file has no non-negative integer serial',
    );
  });
});

withTerraform('readPriorState of plan files terraform writes', () => {
  // Made in beforeAll: the body of a skipped describe still runs.
  let dir: string;

  const tf = (...args: string[]) =>
    new Promise<void>((resolve, reject) => {
      execFile(
        'terraform',
        [`-chdir=${dir}`, ...args],
        { env: { ...process.env, TF_IN_AUTOMATION: '1' } },
        (error, _stdout, stderr) =>
          error ? reject(new Error(`terraform ${args[0]}: ${stderr}`)) : resolve(),
      );
    });
  /** `terraform plan -out`, the plan file's bytes. */
  const plan = async (name: string, rev: string): Promise<Buffer> => {
    await tf('plan', '-input=false', '-no-color', `-var=rev=${rev}`, `-out=${name}`);
    return readFileSync(join(dir, name));
  };
  const apply = (name: string) => tf('apply', '-input=false', '-no-color', '-auto-approve', name);
  /** The JSON of the plan file's `tfstate` entry, read without readPriorState. */
  const tfstate = async (file: Buffer): Promise<Record<string, unknown>> => {
    const archive = await yauzl.fromBufferPromise(file);
    for await (const entry of archive.eachEntry()) {
      if (entry.fileName !== 'tfstate') continue;
      const chunks: Buffer[] = [];
      for await (const chunk of await archive.openReadStreamPromise(entry)) chunks.push(chunk);
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    }
    throw new Error('no tfstate entry');
  };
  /** What terraform.tfstate says now. */
  const current = (): TerraformStateRef => {
    const { lineage, serial } = JSON.parse(readFileSync(join(dir, 'terraform.tfstate'), 'utf8'));
    return { lineage, serial };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'planfence-plan-file-'));
    writeFileSync(
      join(dir, 'main.tf'),
      `variable "rev" { type = string }
resource "terraform_data" "app" { input = "app-\${var.rev}" }
`,
    );
    await tf('init', '-input=false', '-no-color');
  }, 60_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('binds each plan to the state it was computed from', async () => {
    // A fresh workspace: terraform writes a tfstate entry with lineage "" and serial 0.
    const fresh = await plan('fresh.tfplan', '1');
    expect(await tfstate(fresh)).toMatchObject({ version: 4, lineage: '', serial: 0 });
    expect(await readPriorState(fresh)).toEqual({ lineage: '', serial: 0 });

    // The first apply gives the state its lineage.
    await apply('fresh.tfplan');
    const first = current();
    expect(first.lineage).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(first.serial).toBeGreaterThan(0);

    // Two plans from the same state are bound to the same lineage and serial: that state's.
    const one = await readPriorState(await plan('one.tfplan', '2'));
    const two = await readPriorState(await plan('two.tfplan', '3'));
    expect(one).toEqual(first);
    expect(two).toEqual(first);

    // A plan after another apply: same lineage, a higher serial.
    await apply('one.tfplan');
    const later = await readPriorState(await plan('later.tfplan', '4'));
    expect(later).toEqual(current());
    expect(later?.lineage).toBe(first.lineage);
    expect(later?.serial).toBeGreaterThan(first.serial);

    // The plan made before that apply still reads the older state: R56 refuses it.
    expect(await readPriorState(readFileSync(join(dir, 'two.tfplan')))).toEqual(first);
  }, 120_000);
});
