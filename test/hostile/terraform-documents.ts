/**
 * A Terraform plan document that costs masking the most for its size (R54): a sensitive
 * variable of `secrets` strings, each of which must be looked for in an attribute of
 * `strings` strings (a copied sensitive value is masked wherever it appears).
 */
export function maskingHeavyDocument(secrets = 30_000, strings = 40_000): string {
  const values = Array.from({ length: secrets }, (_, i) => `s${i.toString(36).padStart(5, '0')}`);
  const attribute = Array.from(
    { length: strings },
    (_, i) => `t${i.toString(36).padStart(5, '0')}`,
  ).concat(values.slice(0, 10));
  return JSON.stringify({
    format_version: '1.2',
    terraform_version: '1.11.0',
    variables: { secrets: { value: values } },
    configuration: { root_module: { variables: { secrets: { sensitive: true } } } },
    resource_changes: [
      {
        address: 'terraform_data.big',
        mode: 'managed',
        type: 'terraform_data',
        name: 'big',
        change: {
          actions: ['update'],
          before: { input: [] },
          after: { input: attribute },
          after_unknown: {},
          before_sensitive: {},
          after_sensitive: {},
        },
      },
    ],
  });
}
