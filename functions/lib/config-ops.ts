/**
 * The operator function's settings: where it finds each consumer's worker schedule, worker
 * function and ingest mappings (pause, resume), the on-failure bucket (reingest-failed), and
 * what a one-time replay schedule invokes.
 */
import { z } from 'zod';
import { OPERATOR_NAME } from './database-roles';

export const opsEnv = {
  SCHEDULE_GROUP_NAME: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe(
      "The ops function's: the schedule group of the worker schedules (ops pause/resume) and of one-time replays (set by the CDK app).",
    ),
  CONSUMER_DIRECTORY: z
    .string()
    .trim()
    .regex(/^\/[A-Za-z0-9_.\-/]+\/$/, 'must be an SSM path that starts and ends with /')
    .optional()
    .describe(
      'Ops pause/resume and reingest-failed: the SSM path of the consumer directory, one parameter per consumer written by its stack, naming its worker schedule and function, its ingest mappings and ingest function (set by the CDK app; the local run and the tests give theirs; docs/ops.md, "Finding what it switches").',
    ),
  FAILED_RECORDS_BUCKET: z
    .string()
    .trim()
    .min(3)
    .optional()
    .describe("Ops reingest-failed: the ingest mappings' on-failure bucket (set by the CDK app)."),
  OPS_FUNCTION_ARN: z
    .string()
    .trim()
    .startsWith('arn:', 'must be a Lambda function ARN')
    .optional()
    .describe(
      "Ops schedule-replay: the ops function's ARN, which one-time replay schedules invoke (in AWS, taken from the invocation instead).",
    ),
  SCHEDULER_ROLE_ARN: z
    .string()
    .trim()
    .startsWith('arn:', 'must be an IAM role ARN')
    .optional()
    .describe('Ops schedule-replay: the role EventBridge Scheduler assumes to invoke the ops function (set by the CDK app).'),
  OPERATOR_PRINCIPALS: z
    .string()
    .trim()
    .transform((v, ctx) => {
      const parsed = z.array(z.string().startsWith('arn:')).safeParse(
        (() => {
          try {
            return JSON.parse(v) as unknown;
          } catch {
            return undefined;
          }
        })(),
      );
      if (parsed.success) return parsed.data;
      ctx.addIssue({ code: 'custom', message: 'must be a JSON array of IAM role or user ARNs' });
      return z.NEVER;
    })
    .optional()
    .meta({ accepts: 'JSON array of ARNs' })
    .describe(
      "The ops function's: the stage's operators' IAM principals (role or user ARNs), the callers its function URL serves (set by the CDK app).",
    ),
  OPERATORS: z
    .string()
    .trim()
    .transform((v) =>
      v
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== ''),
    )
    .pipe(z.array(z.string().regex(OPERATOR_NAME, 'each must be 1-40 of a-z, 0-9 and _, starting with a letter')))
    .optional()
    .meta({ accepts: 'comma-separated names' })
    .describe(
      "The migration step's: the stage's operators by name, whose own database roles (inbox_ops_<name>) it provisions (set by the CDK app).",
    ),
};

type OpsEnv = z.infer<z.ZodObject<typeof opsEnv>>;

export interface OpsConfig {
  /**
   * The SSM path of the consumer directory: the one place ops finds a consumer's worker
   * schedule, worker function, ingest mappings and ingest function (functions/ops/consumer-directory.ts).
   */
  consumerDirectory?: string;
  /** The on-failure bucket (ops reingest-failed). */
  failedRecordsBucket?: string;
  /** The stage's operators, whose database roles the migration step provisions. */
  operators: string[];
  /** The stage's operators' IAM principals, which the ops function URL serves. */
  operatorPrincipals: string[];
}

export interface SchedulerConfig {
  groupName?: string;
  opsFunctionArn?: string;
  schedulerRoleArn?: string;
}

export function opsConfig(e: OpsEnv): OpsConfig {
  return {
    operators: e.OPERATORS ?? [],
    operatorPrincipals: e.OPERATOR_PRINCIPALS ?? [],
    ...(e.CONSUMER_DIRECTORY !== undefined ? { consumerDirectory: e.CONSUMER_DIRECTORY } : {}),
    ...(e.FAILED_RECORDS_BUCKET !== undefined ? { failedRecordsBucket: e.FAILED_RECORDS_BUCKET } : {}),
  };
}

export function schedulerConfig(e: OpsEnv): SchedulerConfig {
  return {
    ...(e.SCHEDULE_GROUP_NAME !== undefined ? { groupName: e.SCHEDULE_GROUP_NAME } : {}),
    ...(e.OPS_FUNCTION_ARN !== undefined ? { opsFunctionArn: e.OPS_FUNCTION_ARN } : {}),
    ...(e.SCHEDULER_ROLE_ARN !== undefined ? { schedulerRoleArn: e.SCHEDULER_ROLE_ARN } : {}),
  };
}
