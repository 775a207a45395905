import { createRequire, Module } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

/**
 * Puts a stand-in for a CommonJS file in require's cache: its named exports load the real
 * file on first use. For files that a package requires as it loads but calls into only on a
 * path this service never takes.
 */
function defer(file: string, names: string[]): void {
  if (require.cache[file]) return;
  const standIn = new Module(file);
  standIn.filename = file;
  standIn.loaded = true;
  const exports = {};
  for (const name of names) {
    Object.defineProperty(exports, name, {
      enumerable: true,
      get() {
        if (require.cache[file] === standIn) delete require.cache[file];
        return (require(file) as Record<string, unknown>)[name];
      },
    });
  }
  standIn.exports = exports;
  require.cache[file] = standIn;
}

/**
 * TypeORM's DriverFactory requires the driver of every database it supports (their sources,
 * about 1.5 MiB of heap, stay loaded); the service uses SQLite or PostgreSQL.
 */
const typeormDrivers = join(dirname(require.resolve('typeorm')), 'driver');
const TYPEORM_DRIVERS = [
  ['aurora-mysql/AuroraMysqlDriver', 'AuroraMysqlDriver'],
  ['aurora-postgres/AuroraPostgresDriver', 'AuroraPostgresDriver'],
  ['capacitor/CapacitorDriver', 'CapacitorDriver'],
  ['cockroachdb/CockroachDriver', 'CockroachDriver'],
  ['cordova/CordovaDriver', 'CordovaDriver'],
  ['expo/ExpoDriver', 'ExpoDriver'],
  ['mongodb/MongoDriver', 'MongoDriver'],
  ['mysql/MysqlDriver', 'MysqlDriver'],
  ['nativescript/NativescriptDriver', 'NativescriptDriver'],
  ['oracle/OracleDriver', 'OracleDriver'],
  ['postgres/PostgresDriver', 'PostgresDriver'],
  ['react-native/ReactNativeDriver', 'ReactNativeDriver'],
  ['sap/SapDriver', 'SapDriver'],
  ['spanner/SpannerDriver', 'SpannerDriver'],
  ['sqljs/SqljsDriver', 'SqljsDriver'],
  ['sqlserver/SqlServerDriver', 'SqlServerDriver'],
] as const;

/**
 * class-validator's IsPhoneNumber requires libphonenumber-js with its full metadata (about
 * 1.6 MiB of heap); no DTO of the service validates a phone number.
 */
const PHONE_NUMBERS = createRequire(require.resolve('class-validator')).resolve(
  'libphonenumber-js/max',
);

/** The files deferred, and the names each is used by (a test loads each through its stand-in). */
export const DEFERRED_MODULES: { file: string; names: string[] }[] = [
  ...TYPEORM_DRIVERS.map(([path, name]) => ({
    file: join(typeormDrivers, `${path}.js`),
    names: [name],
  })),
  { file: PHONE_NUMBERS, names: ['parsePhoneNumber'] },
];
for (const { file, names } of DEFERRED_MODULES) defer(file, names);
