/**
 * A consumer's schema registry: what its event-source mapping validates records against
 * before they reach the function (Lambda SchemaRegistryConfig; provisioned mode, which every
 * mapping here uses). One schema for both places a registry is declared: the consumer
 * declaration (functions/consumers/*) and a stage's `consumers.<name>.schemaRegistry` in
 * cdk.json, which sets or replaces it, since a registry's ARN or URL is usually per
 * environment. The functions never read it: the decoder knows a validated record by its
 * `valueSchemaMetadata` (functions/ingest/decode.ts).
 *
 * Record formats: JSON has the mapping convert Avro and Protobuf to JSON text, the only form
 * this inbox can store. SOURCE hands over the producer's bytes: right for JSON Schema
 * topics only; an Avro or Protobuf value becomes poison UNSUPPORTED_SOURCE_FORMAT.
 */
import { z } from 'zod';

/** arn:<partition>:glue:<region>:<account>:registry/<name> (names: letters, digits, - _ $ #). */
export const GLUE_REGISTRY_ARN = /^arn:aws[a-z-]*:glue:([a-z0-9-]+):(\d{12}):registry\/([A-Za-z0-9_$#-]{1,255})$/;
/** A complete secret ARN, with the 6-character suffix Secrets Manager appends: the grant names exactly this secret. */
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/(mrk-)?[a-f0-9-]{32,36}$/;
/** https, within Lambda's SchemaRegistryURI alphabet ([a-zA-Z0-9-/*:_+=.@-]). */
const REGISTRY_URL = /^https:\/\/[a-zA-Z0-9\-/*:_+=.@]{1,9992}$/;

const common = {
  validate: z
    .array(z.enum(['KEY', 'VALUE']))
    .min(1)
    .refine((a) => new Set(a).size === a.length, { message: 'each attribute once' })
    .default(['VALUE'])
    .describe('The attributes to validate. The value is what the inbox decodes; a validated KEY is stored as the text delivered.'),
  recordFormat: z
    .enum(['JSON', 'SOURCE'])
    .default('JSON')
    .describe(
      "What the mapping delivers after validation: JSON (Avro and Protobuf converted by the mapping) or SOURCE (the producer's body, framing removed, decoded by the function).",
    ),
};

export const schemaRegistrySchema = z.discriminatedUnion('type', [
  /** An AWS Glue schema registry in the stack's own account and region (that is where the CDK grants schema reads). */
  z.strictObject({
    type: z.literal('glue'),
    registryArn: z
      .string()
      .regex(GLUE_REGISTRY_ARN, 'must be a Glue registry ARN (arn:aws:glue:<region>:<account>:registry/<name>)')
      .describe(
        "glue: the registry, arn:aws:glue:<region>:<account>:registry/<name>, in the stack's own account and region (synth checks it when the stage sets both).",
      ),
    ...common,
  }),
  /** A Confluent (Cloud or self-managed) schema registry, reached with the credentials in a Secrets Manager secret. */
  z.strictObject({
    type: z.literal('confluent'),
    url: z
      .string()
      .regex(REGISTRY_URL, 'must be an https URL of letters, digits and -/*:_+=.@ only (Lambda SchemaRegistryURI)')
      .describe("confluent: the registry's https URL."),
    authentication: z
      .enum(['BASIC_AUTH', 'CLIENT_CERTIFICATE_TLS_AUTH'])
      .describe(
        'confluent: BASIC_AUTH (the secret holds username and password; the only one the ingest function reads itself) or CLIENT_CERTIFICATE_TLS_AUTH (certificate, key and key password).',
      ),
    secretArn: z
      .string()
      .regex(SECRET_ARN, 'must be a complete Secrets Manager secret ARN (…:secret:<name>-<6 characters>)')
      .describe(
        "confluent: the complete ARN (with its 6-character suffix) of the Secrets Manager secret holding the registry's credentials.",
      ),
    secretKmsKeyArn: z
      .string()
      .regex(KMS_KEY_ARN, 'must be a KMS key ARN')
      .optional()
      .describe('confluent: the customer-managed key that encrypts the secret, if any.'),
    ...common,
  }),
]);

/** As declared (defaults may be omitted). */
export type SchemaRegistryDeclaration = z.input<typeof schemaRegistrySchema>;
/** As validated, defaults filled in. */
export type SchemaRegistry = z.output<typeof schemaRegistrySchema>;
