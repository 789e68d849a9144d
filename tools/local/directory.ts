/**
 * The consumer directory of the local run: what each consumer's stack writes to SSM in AWS
 * (functions/ops/consumer-directory.ts), answered in process, so that ops finds a consumer's
 * schedule and worker here the one way it does in AWS: GetParameter under CONSUMER_DIRECTORY.
 */
import { GetParameterCommand, ParameterNotFound, type SSMClient } from '@aws-sdk/client-ssm';
import { directoryParameterName, type ConsumerDirectoryEntry } from '../../functions/ops/consumer-directory';

export const LOCAL_CONSUMER_DIRECTORY = '/kafka-inbox/local/consumers/';

export function localConsumerDirectory(entries: ReadonlyMap<string, ConsumerDirectoryEntry>): Pick<SSMClient, 'send'> {
  const byName = new Map([...entries].map(([consumer, entry]) => [directoryParameterName(LOCAL_CONSUMER_DIRECTORY, consumer), entry]));
  const send = async (command: unknown) => {
    if (!(command instanceof GetParameterCommand)) {
      throw new Error(`the local consumer directory answers GetParameter only, not ${(command as object).constructor.name}`);
    }
    const name = command.input.Name ?? '';
    const entry = byName.get(name);
    if (entry === undefined) throw new ParameterNotFound({ message: `Parameter ${name} not found.`, $metadata: {} });
    return { $metadata: {}, Parameter: { Name: name, Value: JSON.stringify(entry) } };
  };
  return { send: send as SSMClient['send'] };
}
