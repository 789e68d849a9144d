/**
 * A retention on every log group the stacks create or cause. The functions of the project
 * own theirs (InboxFunction); a log group that a service creates on its own — the one
 * Aurora exports the PostgreSQL log to, and those of the helper functions CDK and the
 * Serverless Application Repository add (the trigger's and the custom resources' providers,
 * the secret rotation) — never expires unless something sets it. CDK's log-retention custom
 * resource does: it creates the group if it does not exist yet, so it does not matter which
 * comes first, and its own function's group is kept one day.
 */
import { Stack } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { acknowledge } from './nag';

/** Retention days as the CDK enum (the stage config validates the allowed values). */
export function retentionDays(days: number): logs.RetentionDays {
  return days as logs.RetentionDays;
}

/** The log group Lambda creates for a function that has none of its own: `/aws/lambda/<name>`. */
export function retainDefaultLogGroup(scope: Construct, id: string, functionName: string, days: number): logs.LogRetention {
  const retention = new logs.LogRetention(scope, id, { logGroupName: `/aws/lambda/${functionName}`, retention: retentionDays(days) });
  acknowledgeLogRetentionProvider(Stack.of(scope));
  return retention;
}

/** CDK's log-retention provider: one per stack, with a fixed construct id. */
const LOG_RETENTION_PROVIDER_ID = 'LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a';

/** Its findings, once the provider exists in the stack (after the first log retention, or a cluster's cloudwatchLogsRetention). */
export function acknowledgeLogRetentionProvider(stack: Stack): void {
  const provider = stack.node.tryFindChild(LOG_RETENTION_PROVIDER_ID);
  if (provider === undefined) return;
  acknowledge(provider, [
    {
      id: 'AwsSolutions-IAM4',
      reason: "CDK's log-retention provider runs with AWSLambdaBasicExecutionRole (its own logs); it only sets retention periods.",
      findings: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
    },
    {
      id: 'AwsSolutions-IAM5',
      reason:
        "CDK's log-retention provider sets retention on log groups named at deploy time (a generated function name, the cluster's identifier): logs:PutRetentionPolicy and DeleteRetentionPolicy on any log group, nothing that reads or writes log data.",
      findings: ['Resource::*'],
    },
  ]);
}
