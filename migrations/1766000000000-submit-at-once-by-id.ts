import type { MigrationInterface, QueryRunner } from 'typeorm';
import { FIRST_FIND_PLAN, submitAtOnceFunction } from './1765800000000-submit-at-once.js';

/**
 * PostgreSQL: planfence_submit_plan_at_once finds the plan its decision stored by the
 * plan's id, its primary key, whatever the planner knows of `plans`. It found it by
 * (environment, generation, sequence); a function keeps the plan it chose first for the
 * whole session, and one chosen while the table was small (a new database, or a table
 * that grew since autovacuum last looked) read it through the (environment, status) index:
 * every plan of the environment, under the environment's row lock, on every publish. The id
 * is the one planfence_submit_plan gave the plan: environment@generation.sequence.
 */
const BY_ID = `  SELECT * INTO STRICT v_plan FROM plans
    WHERE id = p_environment || '@' || p_generation || '.' || CAST(v_decision->>'sequence' AS integer);`;

export class SubmitAtOnceById1766000000000 implements MigrationInterface {
  name = 'SubmitAtOnceById1766000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(submitAtOnceFunction(BY_ID));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(submitAtOnceFunction(FIRST_FIND_PLAN));
  }
}
