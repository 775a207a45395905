/**
 * R26: what an environment name pattern may be (`*` matches any run of characters), and
 * how many a token, an identity rule or a webhook may hold. The configuration checks its
 * identity rules with them, so they live at the bottom.
 */
export const ENVIRONMENT_PATTERN = /^[a-z0-9*][a-z0-9._*-]{0,62}$/;
export const MAX_ENVIRONMENT_PATTERNS = 20;
