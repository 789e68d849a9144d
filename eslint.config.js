// ESLint: typescript-eslint's type-aware rules over the whole tree, and the layer rule.
//
// The promise rules come first because a promise left floating in a Lambda handler is the one
// bug class that loses work silently: the runtime freezes the container when the handler
// returns, and whatever was still pending never runs.
//
// Layers point down: handlers and tools → function cores → the consumers → the consumer
// framework → inbox/outbox SQL → lib (LAYERS below). A consumer imports the framework
// through its entry point (functions/framework/index.ts) only.
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
  },
  // The operator's commands drive the cores: a re-ingested poison record is decoded exactly
  // as the ingest function decodes it.
  { name: 'operator commands', folders: ['functions/ops'] },
];

const nameOf = (folder) => folder.split('/').pop();

function layerRules() {
  return LAYERS.flatMap((layer, i) =>
    layer.folders.map((folder) => {
      const peers = layer.folders.filter((f) => f !== folder);
      const higher = LAYERS.slice(i + 1).flatMap((l) => l.folders);
      return {
        files: [`${folder}/**/*.ts`],
        rules: {
          'no-restricted-imports': [
            'error',
            {
              patterns: [
                ...higher.map((f) => ({
                  group: [`**/${nameOf(f)}/*`],
                  message: `${folder} (${layer.name}) sits below ${f}: move what both need down to ${layer.name} or lower.`,
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
        },
      };
    }),
  );
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
