import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import yauzl from 'yauzl';
import { TerraformPlanError } from './terraform.errors.js';

/**
 * The state a plan file was computed from (DESIGN R56): Terraform's `lineage` (the UUID
 * given to a state when it is first written, kept for its whole life) and `serial` (bumped
 * by every write of that state).
 */
export interface TerraformStateRef {
  lineage: string;
  serial: number;
}

/** The entry of a plan file that holds the prior state (`terraform plan -out=FILE`). */
export const PRIOR_STATE_ENTRY = 'tfstate';
/** Largest `tfstate` entry read by default, inflated: 16 MiB. */
export const DEFAULT_MAX_STATE_BYTES = 16 * 1024 * 1024;
/**
 * Largest ratio of an entry's inflated size to its compressed size. Terraform's states
 * deflate about 10:1; deflate itself reaches about 1000:1, what a zip bomb uses.
 */
export const MAX_COMPRESSION_RATIO = 64;
/** Most entries an archive may declare. A plan file holds a handful (plus one per configuration file). */
export const MAX_PLAN_FILE_ENTRIES = 10_000;
/** Longest lineage accepted. Terraform's are UUIDs (36 characters). */
export const MAX_LINEAGE_LENGTH = 64;

/** Compression methods of the zip format that yauzl inflates: stored, deflated. */
const STORED = 0;
const DEFLATED = 8;

/**
 * Reads `lineage` and `serial` from the plan file's `tfstate` entry. Never writes to disk,
 * never executes anything: the archive is read from `planFile` in memory, and only the
 * `tfstate` entry is inflated, bounded by `maxEntryBytes` (default 16 MiB).
 *
 * A state with an empty lineage is what Terraform writes for a workspace that has no state
 * yet: Terraform 1.11's plan of a fresh workspace (local backend, no terraform.tfstate)
 * holds `{"version":4,"terraform_version":"1.11.4","serial":0,"lineage":"","outputs":{},"resources":[],...}`;
 * the lineage is given by the first apply, which writes serial 1. It is returned as it is
 * (lineage ""): such a plan is older than any state reported since (R56).
 *
 * Refused with TerraformPlanError (BAD_USER_INPUT), whose message names what is wrong:
 * not a zip archive (or a malformed one: yauzl's reason is quoted); no `tfstate` entry
 * (every plan file Terraform writes has one); more than
 * MAX_PLAN_FILE_ENTRIES entries; two `tfstate` entries; a `tfstate` entry that is
 * encrypted or compressed with another method than stored or deflated; one that declares
 * more than `maxEntryBytes`, or more than MAX_COMPRESSION_RATIO times its compressed size
 * (a zip bomb); one that inflates to more or fewer bytes than it declares, or whose CRC-32
 * does not match; a state that is not UTF-8 JSON, not an object, or lacks a string lineage
 * (at most MAX_LINEAGE_LENGTH characters) or a non-negative integer serial.
 *
 * The archive is read with yauzl (3.x), a zip reader that follows the specification rather
 * than scanning for headers: it reads entries from the central directory (the names and
 * sizes Terraform's own reader, Go's archive/zip, sees), refuses unsafe entry names
 * (absolute paths, `..` segments, backslashes), checks that a stored entry's two sizes
 * agree and that a deflated one inflates to exactly its declared size, stopping the
 * stream as soon as it inflates past it, so the declared size, once bounded here, bounds
 * the memory. It does not check CRC-32, which is done here (with Node's zlib.crc32).
 */
export async function readPriorState(
  planFile: Buffer,
  limits: { maxEntryBytes?: number } = {},
): Promise<TerraformStateRef> {
  const maxEntryBytes = limits.maxEntryBytes ?? DEFAULT_MAX_STATE_BYTES;
  if (!Number.isSafeInteger(maxEntryBytes) || maxEntryBytes < 1) {
    throw new RangeError(`maxEntryBytes must be a positive integer, not ${maxEntryBytes}`);
  }
  return parseStateRef(await readStateEntry(planFile, maxEntryBytes));
}

/** The inflated bytes of the `tfstate` entry. */
async function readStateEntry(planFile: Buffer, maxEntryBytes: number): Promise<Buffer> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(planFile, {
      decodeStrings: true,
      validateEntrySizes: true,
      strictFileNames: true,
    });
  } catch (error) {
    throw new TerraformPlanError(
      `the plan file is not a zip archive (terraform plan -out=FILE writes one): ${messageOf(error)}`,
    );
  }
  if (zip.entryCount > MAX_PLAN_FILE_ENTRIES) {
    throw new TerraformPlanError(
      `the plan file declares ${zip.entryCount} entries; at most ${MAX_PLAN_FILE_ENTRIES} are read`,
    );
  }

  let state: yauzl.Entry | null = null;
  try {
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName !== PRIOR_STATE_ENTRY) continue;
      if (state !== null) {
        throw new TerraformPlanError(`the plan file has more than one ${PRIOR_STATE_ENTRY} entry`);
      }
      state = entry;
    }
  } catch (error) {
    if (error instanceof TerraformPlanError) throw error;
    throw new TerraformPlanError(`the plan file is not a valid zip archive: ${messageOf(error)}`);
  }
  if (state === null) {
    throw new TerraformPlanError(
      `the plan file has no ${PRIOR_STATE_ENTRY} entry: it is not a plan file terraform plan -out=FILE wrote`,
    );
  }

  checkDeclaredSizes(state, maxEntryBytes);
  return inflate(zip, state);
}

/** Refuses what yauzl would not (or should not) inflate, before a byte is inflated. */
function checkDeclaredSizes(entry: yauzl.Entry, maxEntryBytes: number): void {
  const name = `the ${PRIOR_STATE_ENTRY} entry of the plan file`;
  if (entry.isEncrypted()) throw new TerraformPlanError(`${name} is encrypted`);
  if (entry.compressionMethod !== STORED && entry.compressionMethod !== DEFLATED) {
    throw new TerraformPlanError(
      `${name} uses unsupported compression method ${entry.compressionMethod} (stored and deflated are read)`,
    );
  }
  if (entry.uncompressedSize > maxEntryBytes) {
    throw new TerraformPlanError(
      `${name} declares ${entry.uncompressedSize} bytes; at most ${maxEntryBytes} are read`,
    );
  }
  if (entry.uncompressedSize > MAX_COMPRESSION_RATIO * entry.compressedSize) {
    throw new TerraformPlanError(
      `${name} declares ${entry.uncompressedSize} bytes from ${entry.compressedSize} compressed ` +
        `(more than ${MAX_COMPRESSION_RATIO} times: a zip bomb)`,
    );
  }
}

/** The entry's bytes; yauzl ends the stream with an error past the declared size. */
async function inflate(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  const name = `the ${PRIOR_STATE_ENTRY} entry of the plan file`;
  const chunks: Buffer[] = [];
  try {
    const stream: Readable = await zip.openReadStreamPromise(entry);
    for await (const chunk of stream) chunks.push(chunk as Buffer);
  } catch (error) {
    const message = messageOf(error);
    if (message.startsWith('too many bytes')) {
      throw new TerraformPlanError(
        `${name} inflates to more than the ${entry.uncompressedSize} bytes it declares`,
      );
    }
    if (message.startsWith('not enough bytes')) {
      throw new TerraformPlanError(
        `${name} inflates to fewer than the ${entry.uncompressedSize} bytes it declares`,
      );
    }
    throw new TerraformPlanError(`${name} cannot be read: ${message}`);
  }
  const bytes = Buffer.concat(chunks);
  // zlib.crc32 is Node 20.15's; on an older Node the check is left to the sizes.
  if (typeof zlib.crc32 === 'function' && zlib.crc32(bytes) !== entry.crc32) {
    throw new TerraformPlanError(`${name} does not match its CRC-32 (a damaged archive)`);
  }
  return bytes;
}

/** lineage and serial of a Terraform state document (an empty lineage: no state yet). */
function parseStateRef(bytes: Buffer): TerraformStateRef {
  const name = `the ${PRIOR_STATE_ENTRY} entry of the plan file`;
  let state: unknown;
  try {
    state = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw new TerraformPlanError(`${name} is not a JSON state: ${messageOf(error)}`);
  }
  if (typeof state !== 'object' || state === null || Array.isArray(state)) {
    throw new TerraformPlanError(`${name} is not a JSON object (a Terraform state)`);
  }
  const { lineage, serial } = state as Record<string, unknown>;
  if (typeof lineage !== 'string') {
    throw new TerraformPlanError(`${name} has no string lineage`);
  }
  if (lineage.length > MAX_LINEAGE_LENGTH) {
    throw new TerraformPlanError(
      `${name} has a lineage of ${lineage.length} characters; at most ${MAX_LINEAGE_LENGTH} are accepted`,
    );
  }
  if (typeof serial !== 'number' || !Number.isSafeInteger(serial) || serial < 0) {
    throw new TerraformPlanError(`${name} has no non-negative integer serial`);
  }
  return { lineage, serial };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
