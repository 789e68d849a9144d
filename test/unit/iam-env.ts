/** A runtime function's environment in AWS with IAM database authentication (the CDK app sets these). */
export const IAM = {
  DB_IAM_USER: 'inbox_worker',
  DB_HOST: 'inbox.cluster-abc123.eu-west-1.rds.amazonaws.com',
  DB_PORT: '5432',
  DB_NAME: 'inbox',
  AWS_REGION: 'eu-west-1',
};
