import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL: `planfence_check_token(name, token hash)`, the statement a decision's
 * transaction sends with its BEGIN when the guard took the caller's principal from memory:
 * it raises (SQLSTATE PF401, "this token was revoked" or "unknown token") unless the token
 * still names that principal, unrevoked, so the transaction rolls back and the caller is
 * answered UNAUTHENTICATED. Every other change of a principal's access (rotation, an OIDC
 * renewal, the admin token restored) gives it a new token hash.
 */
export class TokenCheck1765700000000 implements MigrationInterface {
  name = 'TokenCheck1765700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(`CREATE OR REPLACE FUNCTION planfence_check_token(p_name text, p_token_hash text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1 FROM principals WHERE name = p_name AND token_hash = p_token_hash AND revoked_at IS NULL;
  IF FOUND THEN RETURN; END IF;
  IF EXISTS (SELECT 1 FROM principals WHERE name = p_name AND token_hash = p_token_hash) THEN
    RAISE EXCEPTION 'this token was revoked' USING ERRCODE = 'PF401';
  END IF;
  RAISE EXCEPTION 'unknown token' USING ERRCODE = 'PF401';
END
$fn$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query('DROP FUNCTION IF EXISTS planfence_check_token(text, text)');
  }
}
