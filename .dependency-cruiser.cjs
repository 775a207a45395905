/**
 * Import direction (npm run lint): dependencies point down.
 *   1. common/ and config/ at the bottom;
 *   2. storage: database/ and every *.entity.ts (the tables);
 *   3. the guard: fencing/, the only writer of protected state;
 *   4. features: every other folder;
 *   5. wiring on top: app.ts, app.module.ts, main.ts, cli/.
 * client/ is the published client: it imports nothing of the service.
 * Storage and the guard may name the shapes of what is above them (`import type`), never
 * call it. There is no list of tolerated violations: any one fails the lint.
 */
const FEATURES =
  '^src/(audit|auth|dashboard|decisions|deployments|environments|events|health|idempotency|identity|leases|limits|mcp|metrics|outbox|plans|policies|queue|quotas|retention|terraform|webhooks)/';
const STORAGE = '^src/database/|\\.entity\\.ts$';
const WIRING = '^src/(app\\.ts|app\\.module\\.ts|main\\.ts|cli/)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle hides which module is below which: break it (move the shared part down).',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'bottom-imports-nothing-above',
      severity: 'error',
      comment: 'common/ and config/ are the bottom layer: they import only each other.',
      from: { path: '^src/(common|config)/' },
      to: { path: '^src/', pathNot: '^src/(common|config)/' },
    },
    {
      name: 'storage-below-guard-and-features',
      severity: 'error',
      comment: 'Storage (database/, entities) imports only the bottom layer and other storage.',
      from: { path: STORAGE },
      to: {
        path: '^src/',
        pathNot: ['^src/(common|config)/', STORAGE],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'guard-below-features',
      severity: 'error',
      comment:
        "The guard imports storage and other features' entities, errors, models and inputs only: it returns its effects, the decision runner writes them.",
      from: { path: '^src/fencing/' },
      to: {
        path: FEATURES,
        pathNot: ['\\.(entity|errors|model)\\.ts$', '/dto/'],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'nothing-imports-wiring',
      severity: 'error',
      comment: 'app.ts, app.module.ts, main.ts and cli/ sit on top: nothing below imports them.',
      from: { path: '^src/', pathNot: WIRING },
      to: { path: WIRING },
    },
    {
      name: 'client-stands-alone',
      severity: 'error',
      comment: 'The published client imports nothing of the service.',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
