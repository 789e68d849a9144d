// ESLint: typescript-eslint's type-aware rules over the whole tree, and the layer rule.
//
// The promise rules come first because a promise left floating in a Lambda handler is the one
// bug class that loses work silently: the runtime freezes the container when the handler
// returns, and whatever was still pending never runs.
//
// Layers point down: handlers and tools → function cores → the consumers → the consumer
// framework → inbox/outbox SQL → lib (LAYERS below). A consumer imports the framework
// through its entry point (functions/framework/index.ts) only.
//
// The core imports no wing: the wings (functions/wings/*: optional mechanisms such as the
// wake-ups and value decoding) sit above the function cores and plug into their seams; a function's handler.ts
// is where it plugs them in, and the one file of a core folder that may import a wing.
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/**
 * The layers, lowest first. A folder may import from its own folder and the layers below;
 * the folders of one layer are peers that share only what lies below them.
 */
const LAYERS = [
  { name: 'lib', folders: ['functions/lib'] },
  { name: 'inbox/outbox SQL', folders: ['functions/inbox', 'functions/outbox'] },
  { name: 'consumer framework', folders: ['functions/framework'] },
  // The consumers the project ships: examples a team copies, built on the framework alone.
  { name: 'consumers', folders: ['functions/consumers'], throughEntryPoint: ['functions/framework'] },
  {
    name: 'function cores and handlers',
    folders: ['functions/ingest', 'functions/worker', 'functions/reaper', 'functions/relay', 'functions/migrate'],
    plugsWingsIn: true,
  },
  // Optional mechanisms, each behind a seam of the cores: not needed for the guarantees.
  { name: 'wings', folders: ['functions/wings/wake-ups', 'functions/wings/decoding'], wing: true },
  // The operator's commands drive the cores: a re-ingested poison record is decoded exactly
  // as the ingest function decodes it.
  { name: 'operator commands', folders: ['functions/ops'] },
];

/** Where a function's core plugs its wings in: its handler (a folder's handler.ts). */
const PLUGS_WINGS_IN = 'handler.ts';

const nameOf = (folder) => folder.split('/').pop();

/** The wing folders: no core file imports one (a handler.ts plugs them in). */
const WINGS = LAYERS.filter((l) => l.wing).flatMap((l) => l.folders);

function layerRules() {
  return LAYERS.flatMap((layer, i) =>
    layer.folders.flatMap((folder) => {
      const higher = LAYERS.slice(i + 1).flatMap((l) => l.folders);
      const rules = (plugsWingsIn) => restrictedImports(layer, folder, higher, plugsWingsIn);
      // Later entries win: a function's handler.ts gets its folder's rule without the wing patterns.
      return [
        { files: [`${folder}/**/*.ts`], rules: rules(false) },
        ...(layer.plugsWingsIn ? [{ files: [`${folder}/${PLUGS_WINGS_IN}`], rules: rules(true) }] : []),
      ];
    }),
  );
}

function restrictedImports(layer, folder, higher, plugsWingsIn) {
  const peers = layer.folders.filter((f) => f !== folder);
  return {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          ...higher
            .filter((f) => !(plugsWingsIn && WINGS.includes(f)))
            .map((f) => ({
              group: [`**/${nameOf(f)}/*`],
              message: WINGS.includes(f)
                ? `The core imports no wing: ${folder} is core and ${f} a wing. Give the core a seam (an optional dependency or a hook) and plug the wing in from a handler.ts.`
                : `${folder} (${layer.name}) sits below ${f}: move what both need down to ${layer.name} or lower.`,
            })),
          ...(layer.throughEntryPoint ?? []).map((f) => ({
            group: [`**/${nameOf(f)}/*`],
            message: `${folder} imports ${f} through its entry point only ('../${nameOf(f)}').`,
          })),
          ...peers.map((f) => ({
            group: [`**/${nameOf(f)}/*`],
            message: `${folder} and ${f} are peers (${layer.name}): what both need belongs in a layer below them.`,
          })),
        ],
      },
    ],
  };
}

export default defineConfig(
  { ignores: ['node_modules/**', 'cdk.out/**', '.local/**', 'coverage/**', 'test-output/**', '.tmp/**'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  ...layerRules(),
  // A function says what it does in a screen: longer ones are split into named steps that
  // return what they did. Tests are exempt: a scenario reads best in one piece.
  {
    files: ['**/*.ts'],
    ignores: ['test/**'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] },
  },
);
