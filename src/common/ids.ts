/**
 * The ids that carry their fencing tokens: a plan's `<environment>@<generation>.<sequence>`
 * and a deployment's `<environment>#<sequence>`. The one place that writes and reads them.
 */
export interface PlanId {
  environment: string;
  generation: number;
  sequence: number;
}

export const PlanId = {
  format(environment: string, generation: number, sequence: number): string {
    return `${environment}@${generation}.${sequence}`;
  },

  /** The parts of a well-formed plan id (the inputs' pattern checks the form), or null. */
  parse(id: string): PlanId | null {
    const match = /^(.+)@(\d+)\.(\d+)$/.exec(id);
    if (!match) return null;
    return { environment: match[1], generation: Number(match[2]), sequence: Number(match[3]) };
  },

  /** The parts of an id an input's pattern already accepted; anything else is a bug (thrown). */
  of(id: string): PlanId {
    const parsed = PlanId.parse(id);
    if (!parsed) throw new Error(`${id} is not a plan id`);
    return parsed;
  },

  /** The environment part of an id not checked yet (what precedes its last `@`), or null. */
  environmentOf(this: void, id: string): string | null {
    return beforeLast(id, '@');
  },

  /**
   * Orders plan ids as their plans were submitted: by environment, then generation, then
   * sequence, numerically (`prod@1.2` before `prod@1.10`).
   */
  compare(this: void, a: string, b: string): number {
    const [x, y] = [PlanId.of(a), PlanId.of(b)];
    if (x.environment !== y.environment) return x.environment < y.environment ? -1 : 1;
    return x.generation - y.generation || x.sequence - y.sequence;
  },
};

/** A deployment id as an input takes it: `<environment>#<sequence>`. */
export const DEPLOYMENT_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}#[1-9][0-9]{0,9}$/;

export interface DeploymentId {
  environment: string;
  sequence: number;
}

export const DeploymentId = {
  format(environment: string, sequence: number): string {
    return `${environment}#${sequence}`;
  },

  /** The parts of a well-formed deployment id (the inputs' pattern checks the form), or null. */
  parse(id: string): DeploymentId | null {
    const match = /^(.+)#(\d+)$/.exec(id);
    if (!match) return null;
    return { environment: match[1], sequence: Number(match[2]) };
  },

  /** The parts of an id an input's pattern already accepted; anything else is a bug (thrown). */
  of(id: string): DeploymentId {
    const parsed = DeploymentId.parse(id);
    if (!parsed) throw new Error(`${id} is not a deployment id`);
    return parsed;
  },

  /** The environment part of an id not checked yet (what precedes its last `#`), or null. */
  environmentOf(this: void, id: string): string | null {
    return beforeLast(id, '#');
  },
};

function beforeLast(id: string, separator: string): string | null {
  const at = id.lastIndexOf(separator);
  return at > 0 ? id.slice(0, at) : null;
}
