/**
 * Ten plan policies of the kinds docs/policies.md's cookbook shows (WARN, so that every
 * submit is stored and the cost measured is the evaluation's, not a refusal's): fields of
 * the plan, the summary's counts and resource changes (exists, matches, startsWith) and the
 * Terraform document itself.
 */
export const POLICIES: {
  name: string;
  expression: string;
  effect: string;
  message: string;
}[] = [
  [
    'prod-destroy',
    'plan.environment == "prod" && summary.destroy + summary.replace > 0 && !("security" in plan.submitterGroups)',
  ],
  [
    'no-db-destroy',
    'summary.resourceChanges.exists(r, "delete" in r.actions && r.type.matches("^(aws_db_instance|aws_rds_cluster)$"))',
  ],
  ['big-change', 'summary.add + summary.change + summary.destroy + summary.replace > 20000'],
  ['text-in-prod', 'plan.environment == "prod" && plan.contentType == "TEXT"'],
  ['iam', 'summary.resourceChanges.exists(r, r.type.startsWith("aws_iam_"))'],
  ['size', 'plan.contentBytes > 64 * 1024 * 1024'],
  ['title', 'plan.title.lowerAscii().contains("hotfix")'],
  ['groups', 'size(plan.submitterGroups) > 5'],
  ['doc-version', 'terraform != null && terraform.format_version != "1.2"'],
  [
    'doc-outputs',
    'terraform != null && has(terraform.output_changes) && size(terraform.output_changes) > 1000',
  ],
].map(([name, expression]) => ({ name, expression, effect: 'WARN', message: name }));
