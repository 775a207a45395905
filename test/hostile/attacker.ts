import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';

export interface AttackSummary {
  /** Subscriptions whose first answer was an event, or an error (with its codes). */
  next: number;
  error: number;
  codes: Record<string, number>;
  /** Every `next` frame received. */
  events: number;
  /** Close codes of the sockets that closed. */
  closed: number[];
}

export interface Attack {
  options: {
    url: string;
    token: string;
    sockets: number;
    perSocket: number;
    query: string;
    variables?: Record<string, unknown>;
    until: 'answers' | 'killed' | { events: number };
  };
}

/**
 * Runs test/hostile/ws-attacker.mjs in a process of its own: `ready` resolves once its
 * sockets are admitted (the subscribe frames follow at once), `result` with its summary
 * when its `until` is met; `kill` ends it.
 */
export function attack(options: Attack['options']): {
  ready: Promise<void>;
  result: Promise<AttackSummary>;
  kill(): void;
} {
  const child: ChildProcess = spawn(
    process.execPath,
    [join(process.cwd(), 'test/hostile/ws-attacker.mjs'), JSON.stringify(options)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes('ready\n')) markReady();
  });
  const result = once(child, 'exit').then(() => {
    const line = output.split('\n').find((l) => l.startsWith('{'));
    if (!line) throw new Error(`the attacker ended without a summary: ${output}`);
    return JSON.parse(line) as AttackSummary;
  });
  return { ready, result, kill: () => child.kill() };
}
