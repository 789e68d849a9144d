/**
 * AWS Glue Schema Registry: `GetSchemaVersion` by the 16-byte schema version id a value
 * carries. Loaded by schema-source.ts with a Glue consumer's first lookup; the Glue client
 * itself (the runtime's, outside the bundle) is imported when it is first used, since a
 * bundle's static import of an external package loads at the function's start.
 */
import type { GlueClient } from '@aws-sdk/client-glue';
import type { SchemaRegistry } from '../../framework/schema-registry';
import { RegistryUnavailableError, SchemaNotFoundError, type SchemaFetcher } from './schema-source';
import type { SchemaFormat } from './writer-schema';

const FORMATS = new Set<SchemaFormat>(['AVRO', 'PROTOBUF', 'JSON']);

export function glueFetcher(client: Pick<GlueClient, 'send'>): SchemaFetcher {
  return async (ref) => {
    if (ref.registry !== 'glue') throw new SchemaNotFoundError(`a Confluent schema id, but the consumer's registry is Glue`);
    const { GetSchemaVersionCommand } = await import('@aws-sdk/client-glue');
    let out;
    try {
      out = await client.send(new GetSchemaVersionCommand({ SchemaVersionId: ref.versionId }));
    } catch (error) {
      if ((error as { name?: string }).name === 'EntityNotFoundException') {
        throw new SchemaNotFoundError(`the registry has no schema version ${ref.versionId}`);
      }
      throw new RegistryUnavailableError('the Glue schema registry could not be read', { cause: error });
    }
    const format = out.DataFormat as SchemaFormat | undefined;
    if (out.SchemaDefinition === undefined || format === undefined || !FORMATS.has(format)) {
      throw new RegistryUnavailableError('GetSchemaVersion answered without a schema definition');
    }
    return { format, definition: out.SchemaDefinition };
  };
}

/** The declared Glue registry's fetcher, with a client in the registry's region. */
export async function declaredGlueFetcher(registry: Extract<SchemaRegistry, { type: 'glue' }>): Promise<SchemaFetcher> {
  const { GlueClient } = await import('@aws-sdk/client-glue');
  const region = registry.registryArn.split(':')[3];
  return glueFetcher(new GlueClient(region ? { region } : {}));
}
