/**
 * Where ops finds what it switches for a consumer, the one way it knows: one SSM parameter
 * per consumer, `<CONSUMER_DIRECTORY><consumer name>`, written by the consumer's stack,
 * holding its worker schedule's name (in SCHEDULE_GROUP_NAME), its worker function's name,
 * its ingest mappings' UUIDs and its ingest function. The ops function's environment names
 * the path only, so it stays the same size whatever the number of consumers. The local run
 * and the tests answer the same GetParameter calls (tools/local/directory.ts; mocked SSM).
 */
import { GetParameterCommand, ParameterNotFound, type SSMClient } from '@aws-sdk/client-ssm';
import { z } from 'zod';
import { OpsError, OpsErrorCodes } from './errors';

export const consumerDirectoryEntrySchema = z.object({
  workerSchedule: z.string().min(1),
  workerFunction: z.string().min(1),
  ingestMappings: z.array(z.string().min(1)),
  /**
   * The ingest function (reingest-failed). Optional: an entry written by a consumer stack of
   * the release before it has none, and pause and resume must still read that entry.
   */
  ingestFunction: z.string().min(1).optional(),
});
export type ConsumerDirectoryEntry = z.output<typeof consumerDirectoryEntrySchema>;

/** The SSM parameter's name of a consumer's entry. */
export function directoryParameterName(path: string, consumer: string): string {
  return `${path}${consumer}`;
}

/** A consumer's entry; NOT_CONFIGURED when its stack wrote none (not deployed in this stage). */
export async function readConsumerEntry(ssm: Pick<SSMClient, 'send'>, path: string, consumer: string): Promise<ConsumerDirectoryEntry> {
  const name = directoryParameterName(path, consumer);
  let value: string | undefined;
  try {
    value = (await ssm.send(new GetParameterCommand({ Name: name }))).Parameter?.Value;
  } catch (error) {
    if (error instanceof ParameterNotFound) {
      throw new OpsError(OpsErrorCodes.NOT_CONFIGURED, `consumer "${consumer}" is not deployed in this stage (no SSM parameter ${name})`);
    }
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(value ?? '');
  } catch {
    parsed = undefined;
  }
  const entry = consumerDirectoryEntrySchema.safeParse(parsed);
  if (!entry.success) throw new OpsError(OpsErrorCodes.NOT_CONFIGURED, `SSM parameter ${name} is not a consumer directory entry`);
  return entry.data;
}
