/**
 * Plan files for tests: zip archives shaped like the ones `terraform plan -out=FILE` writes,
 * with a `tfstate` entry of a chosen lineage and serial (DESIGN R56), or crafted to be refused.
 */
import { randomBytes } from 'node:crypto';
import { crc32, deflateRawSync } from 'node:zlib';

export const LINEAGE = '026c96fe-9fe5-3488-55db-2ea63b1d5234';

export interface ZipEntry {
  name: string;
  /** The entry's content, uncompressed. */
  data: Buffer | string;
  /** 0 stored, 8 deflated (default), anything else as declared. */
  method?: number;
  /** The uncompressed size written in the headers (default: the true one). */
  declaredSize?: number;
  /** The CRC-32 written in the headers (default: the true one). */
  crc?: number;
  /** General purpose bit flag (bit 0: encrypted). */
  flags?: number;
}

/** A zip archive of these entries, in this order: local headers, central directory, end record. */
export function zip(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const data = Buffer.from(entry.data);
    const method = entry.method ?? 8;
    const payload = method === 8 ? deflateRawSync(data) : data;
    const name = Buffer.from(entry.name, 'utf8');
    const crc = entry.crc ?? crc32(data);
    const size = entry.declaredSize ?? data.length;
    const flags = (entry.flags ?? 0) | 0x800; // names are UTF-8

    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(flags, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(payload.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, payload);

    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(flags, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(payload.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);

    offset += local.length + name.length + payload.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** A state document as Terraform 1.11 writes it, with these fields over it. */
export function state(fields: Record<string, unknown> = {}): string {
  return JSON.stringify(
    {
      version: 4,
      terraform_version: '1.11.4',
      serial: 3,
      lineage: LINEAGE,
      outputs: {},
      resources: [],
      check_results: null,
      ...fields,
    },
    null,
    2,
  );
}

/** A plan file's entries around this `tfstate` entry. */
export function planFile(tfstate: Omit<ZipEntry, 'name'> | null, ...more: ZipEntry[]): Buffer {
  return zip([
    { name: 'tfplan', data: randomBytes(200) },
    ...(tfstate === null ? [] : [{ name: 'tfstate', ...tfstate }]),
    { name: 'tfstate-prev', data: state() },
    { name: 'tfconfig/m-/main.tf', data: 'resource "terraform_data" "app" {}\n' },
    ...more,
  ]);
}

/**
 * The base64 of a plan file computed from the state of `lineage` at `serial` (a plan file's
 * other entries are not read by the service), salted so that two calls differ.
 */
export function planFileBase64(serial = 3, lineage = LINEAGE): string {
  return planFile({ data: state({ serial, lineage }) }).toString('base64');
}
