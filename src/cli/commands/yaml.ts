import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * YAML (or JSON) text parsed by the `yaml` package, loaded on first use: loading it costs
 * about 60 ms of CPU, a quarter of a command's start, and only the commands that read a
 * policy file or a runner configuration need it.
 */
export function parseYaml(text: string): unknown {
  return (require('yaml') as typeof import('yaml')).parse(text);
}
