import { readFileSync } from 'node:fs';
import type { Role } from '../common/role.js';
import { ENVIRONMENT_PATTERN, MAX_ENVIRONMENT_PATTERNS } from '../common/environment-pattern.js';

/** One rule: every listed claim matches (exactly, or as a `*` glob) → this principal. */
export interface OidcRule {
  claims: Record<string, string>;
  /** Name template; `{claim}` is replaced by that claim's value. */
  principal: string;
  role: Role;
  groups: string[];
  /** Environment patterns; null: all environments. */
  environments: string[] | null;
}

export interface OidcIssuer {
  issuer: string;
  /** The one audience a token must carry (and carry alone). */
  audience: string;
  algorithms: string[];
  /** null: read from the issuer's discovery document. */
  jwksUri: string | null;
  /** Claims every token must hold besides iss, aud and exp (default: sub, jti). */
  requiredClaims: string[];
  rules: OidcRule[];
  /** R44: the API also takes this issuer's JWT access tokens whose aud is the service's resource URL. */
  accessTokens: boolean;
}

/**
 * A provider people sign in with (DESIGN §19, R40): the console's (and `planfence login`'s)
 * authorization code flow with PKCE. Its ID tokens' claims are matched by `rules` as R25's
 * (a list claim such as `groups` matches when one element does).
 */
export interface OidcLogin {
  issuer: string;
  clientId: string;
  /** null: a public client (PKCE alone). */
  clientSecret: string | null;
  /** Requested scopes; `openid` is always among them. */
  scopes: string[];
  rules: OidcRule[];
  /** Absolute lifetime of a session. */
  sessionHours: number;
  /** A session unused this long ends. */
  idleMinutes: number;
  /** The button's text in the console; default: the issuer's host. */
  label: string;
}

export interface OidcConfig {
  issuers: OidcIssuer[];
  /** §19: providers people sign in with; empty: no sign-in (tokens only). */
  logins: OidcLogin[];
}

/** The roles of docs/design.md §5 (kept here so that loading the configuration loads no framework). */
const ROLES = ['ADMIN', 'AGENT', 'REVIEWER', 'DEPLOYER', 'VIEWER', 'CHECKER'];
/** docs/design.md §6: group names. */
const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** Signature algorithms an issuer may use: asymmetric only (no `none`, no HMAC). */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** A problem in the OIDC configuration file; the message names where. */
export class OidcConfigProblem extends Error {}

type Json = Record<string, unknown>;

function object(value: unknown, where: string): Json {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new OidcConfigProblem(`${where} must be an object`);
  }
  return value as Json;
}

function onlyKeys(value: Json, allowed: string[], where: string): void {
  const unknown = Object.keys(value).filter((key) => !allowed.includes(key));
  if (unknown.length) {
    throw new OidcConfigProblem(
      `${where} has unknown key(s) ${unknown.join(', ')} (allowed: ${allowed.join(', ')})`,
    );
  }
}

function text(value: unknown, where: string): string {
  if (typeof value !== 'string' || !value.trim()) {
    throw new OidcConfigProblem(`${where} must be a non-empty string`);
  }
  return value;
}

function strings(value: unknown, where: string): string[] {
  if (!Array.isArray(value)) throw new OidcConfigProblem(`${where} must be an array of strings`);
  return value.map((item, i) => text(item, `${where}[${i}]`));
}

/** https, or http on a loopback host (a local issuer for tests and development). */
function url(value: unknown, where: string): string {
  const raw = text(value, where);
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new OidcConfigProblem(`${where} is not a URL ("${raw}")`);
  }
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(parsed.hostname);
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && loopback)) {
    throw new OidcConfigProblem(`${where} must be an https URL (http only on loopback): "${raw}"`);
  }
  return raw;
}

function rule(value: unknown, where: string): OidcRule {
  const r = object(value, where);
  onlyKeys(r, ['claims', 'principal', 'role', 'groups', 'environments'], where);
  const claims = object(r.claims, `${where}.claims`);
  if (!Object.keys(claims).length) {
    throw new OidcConfigProblem(`${where}.claims must list at least one claim`);
  }
  for (const [claim, expected] of Object.entries(claims)) {
    text(expected, `${where}.claims.${claim}`);
  }
  const principal = text(r.principal, `${where}.principal`);
  if (principal.length > 255) throw new OidcConfigProblem(`${where}.principal is longer than 255`);
  const role = text(r.role, `${where}.role`);
  if (!ROLES.includes(role)) {
    throw new OidcConfigProblem(`${where}.role must be one of ${ROLES.join(', ')}`);
  }
  const groups = r.groups === undefined ? [] : strings(r.groups, `${where}.groups`);
  if (groups.length > 20) throw new OidcConfigProblem(`${where}.groups holds more than 20 groups`);
  for (const group of groups) {
    if (!NAME_PATTERN.test(group)) {
      throw new OidcConfigProblem(`${where}.groups: "${group}" is not a group name`);
    }
  }
  let environments: string[] | null = null;
  if (r.environments !== undefined && r.environments !== null) {
    environments = strings(r.environments, `${where}.environments`);
    if (!environments.length || environments.length > MAX_ENVIRONMENT_PATTERNS) {
      throw new OidcConfigProblem(
        `${where}.environments must hold 1 to ${MAX_ENVIRONMENT_PATTERNS} patterns (omit it for all)`,
      );
    }
    for (const pattern of environments) {
      if (!ENVIRONMENT_PATTERN.test(pattern)) {
        throw new OidcConfigProblem(`${where}.environments: "${pattern}" is not a name pattern`);
      }
    }
  }
  return {
    claims: claims as Record<string, string>,
    principal,
    role: role as Role,
    groups,
    environments,
  };
}

function issuer(value: unknown, where: string): OidcIssuer {
  const i = object(value, where);
  onlyKeys(
    i,
    ['issuer', 'audience', 'algorithms', 'jwksUri', 'requiredClaims', 'rules', 'accessTokens'],
    where,
  );
  if (i.accessTokens !== undefined && typeof i.accessTokens !== 'boolean') {
    throw new OidcConfigProblem(`${where}.accessTokens must be true or false`);
  }
  if (Array.isArray(i.audience)) {
    throw new OidcConfigProblem(`${where}.audience must be one string: exactly one audience`);
  }
  const algorithms = strings(i.algorithms ?? ['RS256'], `${where}.algorithms`);
  if (!algorithms.length) throw new OidcConfigProblem(`${where}.algorithms must not be empty`);
  for (const algorithm of algorithms) {
    if (!(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(algorithm)) {
      throw new OidcConfigProblem(
        `${where}.algorithms: "${algorithm}" is not allowed (asymmetric only: ${ASYMMETRIC_ALGORITHMS.join(', ')})`,
      );
    }
  }
  if (!Array.isArray(i.rules) || !i.rules.length) {
    throw new OidcConfigProblem(`${where}.rules must be a non-empty array`);
  }
  return {
    issuer: url(i.issuer, `${where}.issuer`),
    audience: text(i.audience, `${where}.audience`),
    algorithms,
    jwksUri:
      i.jwksUri === undefined || i.jwksUri === null ? null : url(i.jwksUri, `${where}.jwksUri`),
    requiredClaims:
      i.requiredClaims === undefined
        ? ['sub', 'jti']
        : strings(i.requiredClaims, `${where}.requiredClaims`),
    rules: i.rules.map((r, n) => rule(r, `${where}.rules[${n}]`)),
    accessTokens: i.accessTokens === true,
  };
}

function wholeNumber(value: unknown, fallback: number, min: number, max: number, where: string) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new OidcConfigProblem(`${where} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

function login(value: unknown, where: string): OidcLogin {
  const l = object(value, where);
  onlyKeys(
    l,
    [
      'issuer',
      'clientId',
      'clientSecret',
      'scopes',
      'rules',
      'sessionHours',
      'idleMinutes',
      'label',
    ],
    where,
  );
  const issuerUrl = url(l.issuer, `${where}.issuer`);
  const scopes =
    l.scopes === undefined ? ['openid', 'email', 'profile'] : strings(l.scopes, `${where}.scopes`);
  if (!Array.isArray(l.rules) || !l.rules.length) {
    throw new OidcConfigProblem(`${where}.rules must be a non-empty array`);
  }
  return {
    issuer: issuerUrl,
    clientId: text(l.clientId, `${where}.clientId`),
    clientSecret:
      l.clientSecret === undefined || l.clientSecret === null
        ? null
        : text(l.clientSecret, `${where}.clientSecret`),
    scopes: scopes.includes('openid') ? scopes : ['openid', ...scopes],
    rules: l.rules.map((r, n) => rule(r, `${where}.rules[${n}]`)),
    sessionHours: wholeNumber(l.sessionHours, 12, 1, 24 * 30, `${where}.sessionHours`),
    idleMinutes: wholeNumber(l.idleMinutes, 60, 1, 24 * 60 * 30, `${where}.idleMinutes`),
    label: l.label === undefined ? new URL(issuerUrl).host : text(l.label, `${where}.label`),
  };
}

/** Parses and validates the configuration text; OidcConfigProblem names the first problem. */
export function parseOidcConfig(source: string): OidcConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(source);
  } catch (error) {
    throw new OidcConfigProblem(`is not valid JSON: ${(error as Error).message}`);
  }
  const root = object(raw, 'the top level');
  onlyKeys(root, ['issuers', 'logins'], 'the top level');
  if (root.issuers !== undefined && !Array.isArray(root.issuers)) {
    throw new OidcConfigProblem('issuers must be an array');
  }
  if (root.logins !== undefined && !Array.isArray(root.logins)) {
    throw new OidcConfigProblem('logins must be an array');
  }
  const rawIssuers = (root.issuers ?? []) as unknown[];
  const rawLogins = (root.logins ?? []) as unknown[];
  if (!rawIssuers.length && !rawLogins.length) {
    throw new OidcConfigProblem('issuers must be a non-empty array (or logins given)');
  }
  const issuers = rawIssuers.map((value, n) => issuer(value, `issuers[${n}]`));
  const seen = new Set<string>();
  for (const { issuer: name } of issuers) {
    if (seen.has(name)) throw new OidcConfigProblem(`issuer "${name}" is listed twice`);
    seen.add(name);
  }
  const logins = rawLogins.map((value, n) => login(value, `logins[${n}]`));
  const seenLogins = new Set<string>();
  for (const { issuer: name } of logins) {
    if (seenLogins.has(name)) throw new OidcConfigProblem(`logins: "${name}" is listed twice`);
    seenLogins.add(name);
  }
  return { issuers, logins };
}

/** Reads the file `path` names; OidcConfigProblem when it cannot be read or is invalid. */
export function readOidcConfig(path: string): OidcConfig {
  let source: string;
  try {
    source = readFileSync(path, 'utf8');
  } catch (error) {
    throw new OidcConfigProblem(`cannot be read (${path}): ${(error as Error).message}`);
  }
  return parseOidcConfig(source);
}
