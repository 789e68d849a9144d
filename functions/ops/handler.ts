/**
 * The ops Lambda: `{ command, ...args }` → `{ ok: true, command, result }`, or
 * `{ ok: false, error: { code, message } }` for anything the caller can correct (bad
 * arguments, unknown consumer, nothing matched). Failures of the platform (database
 * unreachable, AWS API errors) are thrown: they count as function errors, which the
 * ops function's alarm watches, and a scheduled replay that failed shows there.
 *
 * Lambda cannot tell who invoked it, so commands that change state need `actor` in the
 * event; the one-time schedules of schedule-replay carry the scheduling operator's name.
 */
import { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { SSMClient } from '@aws-sdk/client-ssm';
import { loadConfig } from '../lib/config';
import { getSql } from '../lib/db';
import { createObservability } from '../lib/observability';
import { createOpsHandler } from './run';

const config = loadConfig();
const { logger } = createObservability(config, 'ops');
const scheduler = new SchedulerClient({});
const lambda = new LambdaClient({});
const ssm = new SSMClient({});
const s3 = new S3Client({});

export const handler = createOpsHandler(async () => ({ sql: await getSql(config.database), scheduler, lambda, ssm, s3, config }), logger);
