/** The db project's PostgreSQL: the test kit's global setup (testing/global-setup.ts). */
export { default } from '../../testing/global-setup';
