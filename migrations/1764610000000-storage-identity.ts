import { randomUUID } from 'node:crypto';
import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';

/**
 * The database's identity: one row with an id made when the database is created (or first
 * migrated), which the SQLite data folder also records in `<database>.id`, so that a
 * deleted or replaced database file is noticed. `probed_at` is what the storage health
 * probe writes.
 */
export class StorageIdentity1764610000000 implements MigrationInterface {
  name = 'StorageIdentity1764610000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'storage_identity',
        columns: [
          { name: 'id', type: 'varchar', length: '36', isPrimary: true },
          { name: 'created_at', type: 'bigint' },
          { name: 'probed_at', type: 'bigint', isNullable: true },
        ],
      }),
    );
    const postgres = queryRunner.connection.options.type === 'postgres';
    await queryRunner.query(
      postgres
        ? 'INSERT INTO storage_identity (id, created_at) VALUES ($1, $2)'
        : 'INSERT INTO storage_identity (id, created_at) VALUES (?, ?)',
      [randomUUID(), Date.now()],
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('storage_identity');
  }
}
