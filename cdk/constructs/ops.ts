/**
 * The ops function: the operator commands (functions/ops/commands/).
 *
 *   pause/resume       UpdateSchedule on a consumer's worker schedule (it replaces the whole
 *                      schedule, so it passes the schedules' role again: iam:PassRole on that
 *                      role, to Scheduler only); with --ingest, UpdateEventSourceMapping on
 *                      the consumer's ingest mappings; resume wakes the consumer's worker.
 *   schedule-replay    CreateSchedule of ops-replay-* schedules in the inbox's group, under a
 *                      role of their own that can invoke this function and nothing else.
 *   reingest-failed    reads the on-failure bucket's objects (ListBucket, GetObject under
 *                      aws/lambda/, where the mappings write) and invokes the consumer's
 *                      ingest function with each batch.
 *
 * Operators call it through its function URL (AWS_IAM auth): the resource policy lets the
 * stage's declared operator principals alone invoke it (lambda:InvokeFunctionUrl with the
 * condition lambda:FunctionUrlAuthType AWS_IAM, and lambda:InvokeFunction only with
 * lambda:InvokedViaFunctionUrl), and the function takes the actor from the signed caller
 * (functions/ops/function-url.ts). The replay schedules' role invokes it directly.
 *
 * Nothing here grows with the consumers, so a consumer added in a consumer stack changes
 * neither this function's environment nor its policy. It finds a consumer's schedule,
 * worker and mappings in the consumer directory (SSM parameters its stack writes, under
 * CONSUMER_DIRECTORY), and its permissions name patterns: the worker schedules by their
 * name (`worker-<consumer>`, in the stage's group), the workers and the ingest mappings by
 * the tag their consumer stack gives them (value: the stage id), the directory by its path.
 */
import { ArnFormat, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { REPLAY_SCHEDULE_PREFIX } from '../../functions/ops/args';
import { FAILED_BATCH_PREFIX } from '../../functions/ops/failed-batches';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import type { StageConfig } from '../config';
import type { ConsumerManifest } from '../../functions/framework/manifest';
import { platformEntry } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { acknowledge, resourceFinding } from './nag';
import { WORKER_SCHEDULE_PREFIX, type Schedules } from './scheduled';

/** Tags of a consumer stack's functions and mappings that ops may switch, valued with the stage id. */
export const WORKER_TAG = 'kafka-inbox:worker';
export const INGEST_TAG = 'kafka-inbox:ingest';

export interface OpsProps {
  platform: FunctionPlatform;
  schedules: Schedules;
  /** `<prefix>-<stage>`: the value of WORKER_TAG and INGEST_TAG on what this stage's ops may switch. */
  stageId: string;
  /** The SSM path of the consumer directory (ends with a slash). */
  directoryPath: string;
  /** The ingest mappings' on-failure bucket (reingest-failed). */
  failedRecords: s3.IBucket;
  /** The stage's operators: their principals alone may call the function URL. */
  operators: StageConfig['operators'];
  /** The declared consumers' data, bundled: the consumers its commands know. */
  manifest: ConsumerManifest;
}

const SCHEDULER = 'scheduler.amazonaws.com';

export class Ops extends Construct {
  readonly function: InboxFunction;
  /** How operators call it: AWS_IAM auth, the stage's operator principals only. */
  readonly url: lambda.FunctionUrl;
  /** What one-time replay schedules run as: it may invoke the ops function, nothing else. */
  readonly replayRole: iam.Role;

  constructor(scope: Construct, id: string, props: OpsProps) {
    super(scope, id);
    this.replayRole = new iam.Role(this, 'ReplayRole', {
      assumedBy: new iam.ServicePrincipal(SCHEDULER),
      description: 'EventBridge Scheduler: runs the one-time replay schedules of ops schedule-replay (invokes the ops function only)',
    });
    this.function = this.createFunction(props);
    this.url = this.function.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });
    // The resource policy: each operator principal may call the URL (and invoke the function
    // through it only); CDK writes both statements with their conditions.
    for (const operator of props.operators) this.url.grantInvokeUrl(new iam.ArnPrincipal(operator.principalArn));
    this.grantSwitches(props);
    this.grantReplaySchedules(props);
    this.grantReingestFailed(props);
    // The roles a schedule it writes runs as: the workers' schedules' (pause, resume) and the
    // replays' (schedule-replay); passed to EventBridge Scheduler and to no other service.
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['iam:PassRole'],
        resources: [props.schedules.role.roleArn, this.replayRole.roleArn],
        conditions: { StringEquals: { 'iam:PassedToService': SCHEDULER } },
      }),
    );
    // The replay role invokes this function, by its unqualified ARN (the schedules' target), and nothing else.
    this.replayRole.addToPolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [this.function.functionArn] }));
  }

  private createFunction(props: OpsProps): InboxFunction {
    const fn = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: platformEntry('ops', props.manifest),
      description: 'Kafka inbox operator commands (stats, event, quarantine, replay, resolve, poison, pause/resume, audit)',
      timeout: Duration.seconds(60),
      database: { role: DatabaseRoles.ops },
      environment: {
        CONSUMER_DIRECTORY: props.directoryPath,
        SCHEDULE_GROUP_NAME: props.schedules.group.scheduleGroupName,
        // schedule-replay: the one-time schedules invoke this function through this role.
        // The function's own ARN comes from its invocation context (in the environment it
        // would be a circular reference).
        SCHEDULER_ROLE_ARN: this.replayRole.roleArn,
        FAILED_RECORDS_BUCKET: props.failedRecords.bucketName,
        // Who the function URL serves, checked again by the function (a same-account principal
        // whose own policy allows lambda:InvokeFunctionUrl on * needs no resource policy).
        OPERATOR_PRINCIPALS: JSON.stringify(props.operators.map((o) => o.principalArn)),
      },
    });
    // The one-time replay schedules invoke it asynchronously.
    props.schedules.invokedAsynchronously(fn);

    return fn;
  }

  /**
   * pause/resume: the worker schedules (by name), the consumer directory (by path), the
   * stage's tagged workers and ingest mappings.
   */
  private grantSwitches(props: OpsProps): void {
    const stack = Stack.of(this);
    const groupName = props.schedules.group.scheduleGroupName;
    const workerSchedules = stack.formatArn({
      service: 'scheduler',
      resource: 'schedule',
      resourceName: `${groupName}/${WORKER_SCHEDULE_PREFIX}*`,
    });
    const directory = stack.formatArn({
      service: 'ssm',
      resource: 'parameter',
      resourceName: `${props.directoryPath.replace(/^\//, '')}*`,
    });
    const anyFunction = stack.formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: '*',
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    const anyMapping = stack.formatArn({
      service: 'lambda',
      resource: 'event-source-mapping',
      resourceName: '*',
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['ssm:GetParameter'], resources: [directory] }));
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['scheduler:GetSchedule', 'scheduler:UpdateSchedule'], resources: [workerSchedules] }),
    );
    // pause/resume --ingest read a mapping's state and set Enabled: the mappings its
    // consumer stack tagged for this stage, and no other. IAM has no condition key for what
    // an UpdateEventSourceMapping changes (Enabled, batch size, filter, destination): the
    // Service Authorization Reference gives the action the mapping's ARN (and its tags) and
    // lambda:FunctionArn, the function the mapping invokes. The ingest functions have
    // generated names in the consumer stacks, which this stack cannot list without growing
    // with them, so the bound is the stage's tagged mappings, Get and Update only (no
    // Create or Delete); ops sends Enabled alone (pause-switches.ts), and CloudTrail records
    // every call (docs/ops.md, "Who did it").
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'],
        resources: [anyMapping],
        conditions: { StringEquals: { [`aws:ResourceTag/${INGEST_TAG}`]: props.stageId } },
      }),
    );
    // resume wakes the consumer's worker: the stage's tagged workers, by their unqualified ARN.
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [anyFunction],
        conditions: { StringEquals: { [`aws:ResourceTag/${WORKER_TAG}`]: props.stageId } },
      }),
    );
    acknowledge(this.function, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          'What ops switches lives in the consumer stacks and grows with them: the worker schedules by their name pattern (worker-*) in the inbox group, the consumer directory by its SSM path, the workers and ingest mappings by the tag their stack gives them for this stage (aws:ResourceTag condition).',
        findings: [workerSchedules, directory, anyFunction, anyMapping].map((arn) => resourceFinding(this, arn)),
      },
    ]);
  }

  /**
   * reingest-failed: list and read the failed batches (the mappings' prefix only; no write or
   * delete), and invoke this stage's ingest functions, which their consumer stack tags.
   */
  private grantReingestFailed(props: OpsProps): void {
    const batches = props.failedRecords.arnForObjects(`${FAILED_BATCH_PREFIX}*`);
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [props.failedRecords.bucketArn],
        conditions: { StringLike: { 's3:prefix': `${FAILED_BATCH_PREFIX}*` } },
      }),
    );
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [batches] }));
    const anyFunction = Stack.of(this).formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: '*',
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [anyFunction],
        conditions: { StringEquals: { [`aws:ResourceTag/${INGEST_TAG}`]: props.stageId } },
      }),
    );
    acknowledge(this.function, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          "reingest-failed reads the objects the mappings write under aws/lambda/ (their names are the mappings' UUIDs and times), and invokes the ingest functions of this stage's consumer stacks, found by their tag (aws:ResourceTag condition).",
        findings: [batches, anyFunction].map((arn) => resourceFinding(this, arn)),
      },
    ]);
  }

  /** schedule-replay: one-time schedules named ops-replay-* in the inbox's group; nothing else. */
  private grantReplaySchedules(props: OpsProps): void {
    const replaySchedules = Stack.of(this).formatArn({
      service: 'scheduler',
      resource: 'schedule',
      resourceName: `${props.schedules.group.scheduleGroupName}/${REPLAY_SCHEDULE_PREFIX}*`,
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        // Create only: the schedules delete themselves (ActionAfterCompletion DELETE, done by
        // the Scheduler service), and no ops command reads or deletes them.
        actions: ['scheduler:CreateSchedule'],
        resources: [replaySchedules],
      }),
    );
    acknowledge(this.function, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          'schedule-replay creates one-time schedules with generated names; the wildcard is limited to the ops-replay- prefix inside the inbox schedule group.',
        findings: [resourceFinding(this, replaySchedules)],
      },
    ]);
  }
}
