import { describe, expect, it } from 'vitest';
import { ENVIRONMENT, READ_BY_OTHERS } from '../../functions/lib/config';
import { inboxFunctions, synthesize } from './synth';

// Every variable the CDK app gives a function is in the configuration reference
// (docs/configuration.md): parsed by the functions' schema, or listed as read by others.
describe('the environment the CDK app sets', () => {
  it('holds only documented variables, with every optional one set (tracing, operators, the database straight)', () => {
    const s = synthesize({
      stage: 'dev',
      bundle: false,
      overrides: {
        observability: {
          tracing: {
            exporter: 'collector-layer',
            layerArn: 'arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1',
            configUri: '/opt/collector-config/config.yaml',
            sampler: 'parentbased_traceidratio',
            samplerArg: 0.25,
          },
        },
        operators: [{ name: 'alice', principalArn: 'arn:aws:iam::123456789012:role/alice' }],
      },
    });
    const set = new Set(inboxFunctions(s.stateless).flatMap((f) => Object.keys(f.environment as Record<string, unknown>)));
    // The optional ones this stage sets are among them, so the check below reaches them.
    for (const name of [
      'OTEL_TRACES_SAMPLER_ARG',
      'OPENTELEMETRY_COLLECTOR_CONFIG_URI',
      'NODE_EXTRA_CA_CERTS',
      'OPERATORS',
      'DB_IAM_USER',
    ]) {
      expect(set, name).toContain(name);
    }
    const documented = new Set([...Object.keys(ENVIRONMENT.shape), ...Object.keys(READ_BY_OTHERS)]);
    expect([...set].filter((name) => !documented.has(name))).toEqual([]);
  });
});
