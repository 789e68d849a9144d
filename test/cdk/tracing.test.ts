/** Where a stage's spans go (docs/tracing.md): nothing by default; a collector extension; an OTLP endpoint. */
import { describe, expect, it } from 'vitest';
import { TRACE_WRITE_ACTIONS } from '../../cdk/constructs/inbox-function';
import { actionsOf, CDK_JSON, inboxFunctions, synthesize, unacknowledgedNagErrors } from './synth';
import { parseStageConfig } from '../../cdk/config';
import { CONSUMERS } from '../../functions/consumers';

const LAYER = 'arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1';
const otelKeys = (env: Record<string, unknown>) => Object.keys(env).filter((k) => k.startsWith('OTEL_') || k.startsWith('OPENTELEMETRY_'));
const layersOf = (s: ReturnType<typeof synthesize>) =>
  Object.values(s.stateless.findResources('AWS::Lambda::Function'))
    .filter((f) => String(f.Properties.Description ?? '').startsWith('Kafka inbox'))
    .map((f) => f.Properties.Layers as unknown);

describe('tracing', () => {
  it.each(Object.keys(CDK_JSON.context.stages))(
    'stage %s: off, so no function is told of OpenTelemetry, has a collector or may write to X-Ray',
    (stage) => {
      const s = synthesize({ stage, bundle: false });
      const functions = inboxFunctions(s.stateless);
      expect(functions.length).toBeGreaterThan(0);
      for (const f of functions) {
        expect(otelKeys(f.environment), f.description).toEqual([]);
        expect(
          f.statements.flatMap(actionsOf).filter((a) => a.startsWith('xray:')),
          f.description,
        ).toEqual([]);
      }
      expect(layersOf(s).every((l) => l === undefined)).toBe(true);
    },
  );

  it('a collector layer: every function has it, exports to it on localhost, and may write what its X-Ray exporters send', () => {
    const s = synthesize({
      stage: 'dev',
      bundle: false,
      overrides: {
        observability: {
          logRetentionDays: 14,
          tracing: {
            exporter: 'collector-layer',
            layerArn: LAYER,
            configUri: '/opt/collector-config/config.yaml',
            sampler: 'parentbased_traceidratio',
            samplerArg: 0.1,
          },
        },
      },
    });
    const functions = inboxFunctions(s.stateless);
    expect(layersOf(s)).toEqual(functions.map(() => [LAYER]));
    for (const f of functions) {
      expect(f.environment, f.description).toMatchObject({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.1',
        OPENTELEMETRY_COLLECTOR_CONFIG_URI: '/opt/collector-config/config.yaml',
      });
      const xray = f.statements.filter((st) => actionsOf(st).some((a) => a.startsWith('xray:')));
      expect(
        xray.map((st) => ({ actions: actionsOf(st).sort(), resource: st.Resource })),
        f.description,
      ).toEqual([{ actions: [...TRACE_WRITE_ACTIONS].sort(), resource: '*' }]);
    }
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });

  it('an OTLP endpoint: the functions export to it, with no collector and no AWS permission', () => {
    const s = synthesize({
      stage: 'dev',
      bundle: false,
      overrides: {
        observability: {
          logRetentionDays: 14,
          tracing: { exporter: 'otlp', endpoint: 'http://collector.internal:4318', protocol: 'http/json' },
        },
      },
    });
    for (const f of inboxFunctions(s.stateless)) {
      expect(f.environment).toMatchObject({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.internal:4318',
      });
      expect(f.statements.flatMap(actionsOf).filter((a) => a.startsWith('xray:'))).toEqual([]);
    }
    expect(layersOf(s).every((l) => l === undefined)).toBe(true);
  });

  it('refuses an exporter it does not have, naming the key', () => {
    expect(() =>
      parseStageConfig('t', { msk: { createDevCluster: true }, observability: { tracing: { exporter: 'grpc' } } }, CONSUMERS, {}),
    ).toThrow(/observability\.tracing/);
  });
});
