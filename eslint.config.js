// ESLint: typescript-eslint's type-aware rules over the whole tree, and the layer rule.
//
// The promise rules come first because a promise left floating in a Lambda handler is the one
// bug class that loses work silently: the runtime freezes the container when the handler
// returns, and whatever was still pending never runs.
//
// Layers point down: handlers and tools → function cores → the consumer framework →
// inbox/outbox SQL → lib. A module may import from its own layer or any layer below it.
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** The folders of each layer, lowest first; a layer may not import from one above it. */
const LAYERS = [
  { name: 'lib', folders: ['functions/lib'] },
  { name: 'inbox/outbox SQL', folders: ['functions/inbox', 'functions/outbox'] },
  { name: 'consumer framework', folders: ['functions/consumers'] },
];

/** Folders above every layer in LAYERS: the function cores, their handlers and the tools. */
const ABOVE = ['functions/ingest', 'functions/worker', 'functions/reaper', 'functions/relay', 'functions/ops', 'functions/migrate'];

function layerRules() {
  return LAYERS.map((layer, i) => {
    const higher = [...LAYERS.slice(i + 1).flatMap((l) => l.folders), ...ABOVE];
    return {
      files: layer.folders.map((f) => `${f}/**/*.ts`),
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: higher.map((folder) => ({
              group: [`**/${folder.split('/').pop()}/*`],
              message: `${layer.name} sits below ${folder}: move what both need down to ${layer.name} or lower.`,
            })),
          },
        ],
      },
    };
  });
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
);
