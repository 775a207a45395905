/**
 * `logins` in PLANFENCE_OIDC_CONFIG (DESIGN §19): validated at start; a problem stops the
 * start (exit 78) with a message naming the variable and the key; the defaults; and the
 * rules' matching of list claims (one element of `groups` matches).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { parseOidcConfig } from '../src/config/oidc-config.js';
import { claimMatches, firstMatchingRule } from '../src/sessions/login-rules.js';
import { scratchDir } from './support/app.js';

const LOGIN = {
  issuer: 'https://idp.example.com',
  clientId: 'planfence',
  rules: [{ claims: { groups: 'sre' }, principal: '{email}', role: 'REVIEWER' }],
};

function problem(config: unknown): string {
  const dir = scratchDir();
  try {
    const path = join(dir.path, 'oidc.json');
    writeFileSync(path, JSON.stringify(config));
    loadConfig({ DATABASE_URL: 'sqlite::memory:', PLANFENCE_OIDC_CONFIG: path });
    return 'no problem';
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('PLANFENCE_OIDC_CONFIG');
    return (error as Error).message;
  } finally {
    dir.cleanup();
  }
}

// proves: R40
test('logins are validated at start; a problem names PLANFENCE_OIDC_CONFIG and the key', () => {
  expect(problem({ logins: [LOGIN] })).toBe('no problem');
  expect(problem({ logins: [{ ...LOGIN, clientId: '' }] })).toContain('logins[0].clientId');
  expect(problem({ logins: [{ ...LOGIN, issuer: 'http://idp.example.com' }] })).toContain(
    'logins[0].issuer must be an https URL',
  );
  expect(problem({ logins: [{ ...LOGIN, rules: [] }] })).toContain('logins[0].rules');
  expect(
    problem({ logins: [{ ...LOGIN, rules: [{ ...LOGIN.rules[0], role: 'OWNER' }] }] }),
  ).toContain('logins[0].rules[0].role');
  expect(problem({ logins: [{ ...LOGIN, idleMinutes: 0 }] })).toContain('logins[0].idleMinutes');
  expect(problem({ logins: [{ ...LOGIN, sessionHours: 1.5 }] })).toContain(
    'logins[0].sessionHours',
  );
  expect(problem({ logins: [{ ...LOGIN, clientSecrett: 'x' }] })).toContain('clientSecrett');
  expect(problem({ logins: [LOGIN, LOGIN] })).toContain('listed twice');
  expect(problem({ logins: 'yes' })).toContain('logins must be an array');
  expect(problem({})).toContain('issuers must be a non-empty array');
});

test('defaults: a public client, openid always requested, 12 hours, 60 idle minutes, the host as label', () => {
  const [login] = parseOidcConfig(
    JSON.stringify({ logins: [{ ...LOGIN, scopes: ['email', 'groups'] }] }),
  ).logins;
  expect(login).toMatchObject({
    clientSecret: null,
    scopes: ['openid', 'email', 'groups'],
    sessionHours: 12,
    idleMinutes: 60,
    label: 'idp.example.com',
  });
});

test('a list claim matches when one of its elements does; scalars exactly or as a glob', () => {
  expect(claimMatches({ groups: ['staff', 'sre'] }, 'groups', 'sre')).toBe(true);
  expect(claimMatches({ groups: ['staff', 'sre-oncall'] }, 'groups', 'sre-*')).toBe(true);
  expect(claimMatches({ groups: ['staff'] }, 'groups', 'sre')).toBe(false);
  expect(claimMatches({ groups: [] }, 'groups', '*')).toBe(false);
  expect(claimMatches({ email: 'a@example.com' }, 'email', '*@example.com')).toBe(true);
  expect(claimMatches({ email: 'a@example.com.evil' }, 'email', '*@example.com')).toBe(false);
  expect(claimMatches({ verified: true }, 'verified', 'true')).toBe(true);
  const rules = parseOidcConfig(
    JSON.stringify({
      logins: [
        {
          ...LOGIN,
          rules: [
            { claims: { groups: 'admins' }, principal: '{email}', role: 'ADMIN' },
            { claims: { groups: 'sre' }, principal: '{email}', role: 'REVIEWER' },
          ],
        },
      ],
    }),
  ).logins[0].rules;
  expect(firstMatchingRule(rules, { groups: ['sre', 'admins'] })?.index).toBe(0);
  expect(firstMatchingRule(rules, { groups: ['sre'] })?.index).toBe(1);
  expect(firstMatchingRule(rules, { groups: 'sre' })?.index).toBe(1);
  expect(firstMatchingRule(rules, {})).toBeNull();
});
