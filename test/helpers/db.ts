/** The per-file test databases live in the public test kit (testing/database.ts); the project's own tests use them from here. */
export { createTestDatabase, emptyDatabase, settledRoles, useTestDatabase, type TestDatabase } from '../../testing/database';
