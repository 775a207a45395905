/**
 * Import direction (npm run lint): dependencies point down.
 *   1. common/ and config/ at the bottom;
 *   2. the model: model/ (the entities of protected state and their coded errors) and every
 *      other *.entity.ts (a table);
 *   3. storage: database/;
 *   4. the guard: fencing/, the only writer of protected state;
 *   5. features: every other folder;
 *   6. wiring on top: app.ts, app.module.ts, main.ts, cli/.
 * client/ is the published client: it imports nothing of the service.
 * The model, storage and the guard may name the shapes of what is above them (`import
 * type`), never call it. There is no list of tolerated violations: any one fails the lint.
 * Folders on one floor import one another in one direction: scripts/folder-cycles.mjs (run
 * after this by `npm run lint:deps`) fails on folders of src/ that import one another at run
 * time; a `scope: 'folder'` rule here would count `import type` too.
 */
/** Every folder of src/ that is not one of the floors below or the wiring above. */
const FEATURES = '^src/(?!(common|config|client|model|database|fencing|cli)/)[^/]+/';
const MODEL = '^src/model/|\\.entity\\.ts$';
const STORAGE = '^src/database/';
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
      name: 'model-below-storage',
      severity: 'error',
      comment: 'The model (model/, entities) imports only the bottom layer and the model.',
      from: { path: MODEL },
      to: {
        path: '^src/',
        pathNot: ['^src/(common|config)/', MODEL],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'storage-below-guard-and-features',
      severity: 'error',
      comment: 'Storage (database/) imports only the bottom layer, the model and storage.',
      from: { path: STORAGE },
      to: {
        path: '^src/',
        pathNot: ['^src/(common|config)/', MODEL, STORAGE],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'guard-below-features',
      severity: 'error',
      comment:
        'The guard imports the ground, the model and storage; of the features it names shapes only (`import type`): it returns its effects, the decision runner writes them.',
      from: { path: '^src/fencing/' },
      to: {
        path: FEATURES,
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
      name: 'audit-written-by-the-runner',
      severity: 'error',
      comment:
        'Audit events are written by the decision runner (src/decisions/), for accepted and refused decisions alike: nothing else calls AuditService.',
      from: { path: '^src/', pathNot: '^src/(audit|decisions)/' },
      to: { path: '^src/audit/audit\\.service\\.ts$', dependencyTypesNot: ['type-only'] },
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
