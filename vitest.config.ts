import { defineConfig } from 'vitest/config';

// Four projects: `unit` (no database), `db` (real PostgreSQL: embedded, or TEST_DATABASE_URL),
// `cdk` (template synthesis) and `e2e` (the real commands in child processes, each with its
// own embedded PostgreSQL, and the report in a browser). CI runs all of them, then `unit`
// and `db` (against PostgreSQL 15) again on the functions' Node.js major (.ci/run).
export default defineConfig({
  test: {
    // Powertools: keep EMF output out of the test log.
    env: { POWERTOOLS_METRICS_DISABLED: 'true', POWERTOOLS_DEV: 'false' },
    pool: 'forks',
    // Two cores: two test files at a time, each with its own cloned database.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'db',
          include: ['test/db/**/*.test.ts'],
          globalSetup: ['test/setup/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          name: 'cdk',
          include: ['test/cdk/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
