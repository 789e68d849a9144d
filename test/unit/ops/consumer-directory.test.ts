/** The consumer directory as ops reads it: the exact SSM call, and a clear refusal for anything but an entry. */
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { readConsumerEntry } from '../../../functions/ops/consumer-directory';
import { OpsError } from '../../../functions/ops/errors';

const ssm = new SSMClient({ region: 'eu-west-1' });
const ssmMock = mockClient(ssm);
const PATH = '/KafkaInbox/dev/consumers/';

beforeEach(() => ssmMock.reset());

describe('readConsumerEntry', () => {
  it("reads the consumer's parameter under the path and returns its entry", async () => {
    const entry = { workerSchedule: 'worker-case-sla', workerFunction: 'fn-worker', ingestMappings: ['uuid-1', 'uuid-2'] };
    ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: JSON.stringify(entry) } });

    await expect(readConsumerEntry(ssm, PATH, 'case-sla')).resolves.toEqual(entry);
    expect(ssmMock.calls().map((c) => c.args[0].input)).toEqual([{ Name: '/KafkaInbox/dev/consumers/case-sla' }]);
  });

  it.each([
    [
      'a missing parameter',
      () => ssmMock.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'nope', $metadata: {} })),
      /is not deployed in this stage/,
    ],
    [
      'a value that is not JSON',
      () => ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: 'worker-case-sla' } }),
      /is not a consumer directory entry/,
    ],
    [
      'an entry without its mappings',
      () => ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: '{"workerSchedule":"w","workerFunction":"f"}' } }),
      /is not a consumer directory entry/,
    ],
  ])('refuses %s with NOT_CONFIGURED', async (_what, arrange, message) => {
    arrange();
    const error = await readConsumerEntry(ssm, PATH, 'case-sla').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpsError);
    expect(error).toMatchObject({ code: 'NOT_CONFIGURED', message: expect.stringMatching(message) });
  });
});
