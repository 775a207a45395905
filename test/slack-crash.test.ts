/**
 * Slack messages go through the outbox (R22): a kill -9 of the service between the submits
 * and their messages' posts (one post in flight) loses none of them; after the restart each
 * plan awaiting review gets its message, once. And a bad PLANFENCE_SLACK_CONFIG stops the
 * start (exit 78, naming the key).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, ConfigError } from '../src/config/config.js';
import { ADMIN_TOKEN, distFile, ServiceProcess } from './fault/service.js';
import { scratchDatabase, scratchDir } from './support/app.js';
import { hasButtons, SlackApiServer } from './support/slack-api.js';
import { until } from './support/until.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function slackConfig(file: object): string {
  const dir = mkdtempSync(join(tmpdir(), 'planfence-slack-'));
  const path = join(dir, 'slack.json');
  writeFileSync(path, JSON.stringify(file));
  return path;
}

// proves: R22
test('kill -9 between submit and post: after the restart every plan awaiting review gets one message', async () => {
  const slack = new SlackApiServer();
  await slack.start();
  const database = await scratchDatabase(true);
  const service = new ServiceProcess(
    database.url.startsWith('sqlite:') ? database.url.slice('sqlite:'.length) : database.url,
    {
      PLANFENCE_SLACK_CONFIG: slackConfig({
        botToken: slack.token,
        signingSecret: 'crash-test-signing-secret',
        apiUrl: slack.url,
        channels: [{ environments: ['crash-*'], channel: '#reviews' }],
      }),
    },
  );
  try {
    await service.start();
    const agent = await service.issueToken('agent', 'AGENT');
    slack.holdPosts = true;
    const planIds: string[] = [];
    for (const environment of ['crash-a', 'crash-b']) {
      await service.ok(
        ADMIN_TOKEN,
        'mutation($name: String!) { createEnvironment(input: { name: $name }) { name } }',
        { name: environment },
      );
      const { acquireLease } = await service.ok(
        agent,
        'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 600 }) { generation } }',
        { e: environment },
      );
      for (let i = 0; i < 3; i++) {
        const { submitPlan } = await service.ok(
          agent,
          'mutation($e: String!, $g: Int!, $k: String!, $c: String!) { submitPlan(input: { environment: $e, generation: $g, idempotencyKey: $k, content: $c, title: $c }) { id } }',
          { e: environment, g: acquireLease.generation, k: `${environment}-${i}`, c: `plan ${i}` },
        );
        planIds.push(submitPlan.id);
      }
    }
    // The first post is in flight, unanswered, when the service dies.
    await until('a post in flight', () => slack.held >= 1);
    await service.crash();
    expect(slack.messages.size).toBe(0);
    slack.holdPosts = false;
    await service.start();
    await until('every plan posted', () => slack.messages.size >= planIds.length, {
      progress: () => slack.messages.size,
    });
    await sleep(1500); // and nothing more comes
    const posted = [...slack.messages.values()];
    expect(posted).toHaveLength(planIds.length);
    for (const id of planIds) {
      const mine = posted.filter((m) => JSON.stringify(m.blocks).includes(`plan ${id})`));
      expect(mine).toHaveLength(1);
      expect(hasButtons(mine[0].blocks)).toBe(true);
    }
  } finally {
    await service.stop();
    await database.cleanup();
    await slack.stop();
  }
}, 120_000);

test('a bad PLANFENCE_SLACK_CONFIG stops the start with exit 78, naming the key and what is wrong', () => {
  const bad = [
    [{ signingSecret: 's', channels: [{ environments: ['*'], channel: '#c' }] }, /botToken/],
    [{ botToken: 'b', signingSecret: 's', channels: [] }, /channels/],
    [
      {
        botToken: 'b',
        signingSecret: 's',
        apiUrl: 'ftp://x',
        channels: [{ environments: ['*'], channel: '#c' }],
      },
      /apiUrl/,
    ],
    [
      { botToken: 'b', signingSecret: 's', channels: [{ environments: [], channel: '#c' }] },
      /environments/,
    ],
  ] as const;
  for (const [file, problem] of bad) {
    const env = { PLANFENCE_SLACK_CONFIG: slackConfig(file) };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(problem);
  }
  expect(() => loadConfig({ PLANFENCE_SLACK_CONFIG: '/nonexistent/slack.json' })).toThrow(
    /PLANFENCE_SLACK_CONFIG names a file that cannot be read/,
  );
  const good = loadConfig({
    PLANFENCE_SLACK_CONFIG: slackConfig({
      botToken: 'b',
      signingSecret: 's',
      channels: [{ environments: ['prod-*'], channel: '#c' }],
    }),
  });
  expect(good.slack?.apiUrl).toBe('https://slack.com/api');

  const dir = scratchDir();
  try {
    const started = spawnSync(process.execPath, [distFile('src/main.js')], {
      env: {
        ...process.env,
        PORT: '0',
        PLANFENCE_ADMIN_TOKEN_FILE: join(dir.path, 'admin-token'),
        DATABASE_URL: `sqlite:${join(dir.path, 'planfence.db')}`,
        PLANFENCE_SLACK_CONFIG: slackConfig({ botToken: 'b' }),
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(started.status).toBe(78);
    expect(started.stderr).toContain('invalid configuration: PLANFENCE_SLACK_CONFIG');
  } finally {
    dir.cleanup();
  }
});
