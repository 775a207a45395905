import type { MigrationInterface, QueryRunner } from 'typeorm';
import {
  FIRST_STATEMENTS,
  submitPlanFunction,
  type SubmitPlanStatements,
} from './1765500000000-submit-in-one-statement.js';

/**
 * PostgreSQL: planfence_submit_plan finds the plans it reads by their index whatever the
 * planner knows of the table. Until PostgreSQL has analyzed `plans` (a new database, or
 * a table that grew fast since autovacuum last looked), it guesses how many rows each
 * condition keeps, and a function keeps the plan it chose first for the whole session. Two
 * of its statements were then answered by reading every plan of the environment, under the
 * environment's row lock: the next sequence (`MAX(sequence)`, planned as a scan of the
 * environment's plans) and R8's update (`status IN (...)`, planned as a scan of the
 * environment with the status as a filter). Now the next sequence is the last entry of the
 * (environment, generation, sequence) index, and R8 is two updates that each name one status,
 * both columns of the (environment, status) index. The rules and their order do not change.
 */
const BY_INDEX: SubmitPlanStatements = {
  nextSequence: `  v_sequence := COALESCE((SELECT p.sequence FROM plans p
    WHERE p.environment = p_environment AND p.generation = p_generation
    ORDER BY p.sequence DESC LIMIT 1), 0) + 1;`,
  supersede: `    UPDATE plans SET status = 'SUPERSEDED'
    WHERE environment = p_environment AND status = 'PUBLISHED' AND id <> v_id;
    UPDATE plans SET status = 'OBSOLETE'
    WHERE environment = p_environment AND status = 'PROPOSED'
      AND EXISTS (SELECT 1 FROM environments e WHERE e.name = p_environment
        AND (plans.generation < e.fence OR plans.generation < e.current_generation
          OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)));`,
};

export class SubmitByIndex1765900000000 implements MigrationInterface {
  name = 'SubmitByIndex1765900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(submitPlanFunction(BY_INDEX));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(submitPlanFunction(FIRST_STATEMENTS));
  }
}
