/**
 * What the consumer stacks use of the platform stack, and what the ops function learns of
 * the consumer stacks, through SSM parameters as between the stateful stack and the others
 * (stage-references.ts): no export ties two stacks, so a consumer stack can be added,
 * changed or removed without the platform stack changing, and the other way round.
 *
 *   /<prefix>/<stage>/platform/…        written by the platform stack, read by every consumer stack
 *   /<prefix>/<stage>/consumers/<name>  written by a consumer's stack: where ops finds what it
 *                                       switches (its worker schedule and function, its mappings)
 */
import { Lazy } from 'aws-cdk-lib';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import type { StageConfig } from '../config';

export const PLATFORM_PARAMETERS = {
  failedRecordsBucketArn: 'failed-records/bucket-arn',
  scheduleGroupName: 'schedules/group-name',
  schedulerRoleArn: 'schedules/role-arn',
  schedulesDeadLetterQueueArn: 'schedules/dead-letter-queue-arn',
  failedInvocationsQueueArn: 'schedules/failed-invocations-queue-arn',
  alarmTopicArn: 'alarms/topic-arn',
} as const;

export type PlatformParameter = keyof typeof PLATFORM_PARAMETERS;

type StageId = Pick<StageConfig, 'stackPrefix' | 'stage'>;

/** `<prefix>-<stage>`: the value of the tags that let the platform's roles reach a consumer stack's functions. */
export function stageIdOf(config: StageId): string {
  return `${config.stackPrefix}-${config.stage}`;
}

export function platformParameterName(config: StageId, key: PlatformParameter): string {
  return `/${config.stackPrefix}/${config.stage}/platform/${PLATFORM_PARAMETERS[key]}`;
}

/** The path under which each consumer's directory entry is written (ends with a slash). */
export function consumerDirectoryPath(config: StageId): string {
  return `/${config.stackPrefix}/${config.stage}/consumers/`;
}

export function writePlatformParameters(scope: Construct, config: StageConfig, values: Record<PlatformParameter, string>): void {
  for (const key of Object.keys(PLATFORM_PARAMETERS) as PlatformParameter[]) {
    new ssm.StringParameter(scope, `Parameter-${key}`, {
      parameterName: platformParameterName(config, key),
      stringValue: values[key],
      description: `Kafka inbox ${config.stage}: ${PLATFORM_PARAMETERS[key]} of the platform stack, read by the consumer stacks at deploy time`,
    });
  }
}

/**
 * The platform's values as a consumer stack reads them (CloudFormation resolves them at
 * deploy time), each declared only if something renders it (an unused parameter is a
 * template warning).
 */
export function readPlatformParameters(scope: Construct, config: StageConfig): Record<PlatformParameter, string> {
  return Object.fromEntries(
    (Object.keys(PLATFORM_PARAMETERS) as PlatformParameter[]).map((key) => [
      key,
      Lazy.string({ produce: () => ssm.StringParameter.valueForStringParameter(scope, platformParameterName(config, key)) }),
    ]),
  ) as Record<PlatformParameter, string>;
}
