/** `npm run demo` keeps telling the truth: it exits 0 only when every outcome is DESIGN §4's. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const DEMO = fileURLToPath(new URL('../dist/demo/paused-agent.js', import.meta.url));

// proves: R3, R20
test('the paused-agent demo plays every scenario and observes the §4 table', async () => {
  const { code, stdout, stderr } = await new Promise<{
    code: number;
    stdout: string;
    stderr: string;
  }>((resolve) => {
    execFile(process.execPath, [DEMO], (error, out, err) =>
      resolve({ code: error ? Number(error.code) : 0, stdout: out, stderr: err }),
    );
  });
  // A demo that stopped on an error says why on stderr: the failure shows it.
  if (stderr.includes('demo failed:')) throw new Error(`${stderr}\n${stdout.slice(-1500)}`);
  expect(stdout).toContain("A's plan rejected: STALE_GENERATION (generation 1, fence 2)");
  expect(stdout).toMatch(
    /A submits after B acquired, before B's first write\s+accepted\s+STALE_GENERATION/,
  );
  expect(stdout).toMatch(
    /A submits after its lease expired, nobody acquired\s+accepted\s+LEASE_NOT_HELD/,
  );
  expect(stdout).toContain('Every outcome is the one docs/design.md promises.');
  expect(stdout).toMatch(/shop#1 reads UNKNOWN/);
  expect(stdout).toContain('Every deployment outcome is the one docs/design.md promises.');
  expect(stdout).toMatch(
    /submit_plan answers isError=true: STALE_GENERATION: .*take a new lease and plan again/,
  );
  expect(stdout).toContain('Over MCP too, the stale agent is fenced and told what to do next.');
  expect(code).toBe(0);
}, 120_000);
