/**
 * Nothing discarded for its age: the mappings keep records of any age unless a stage asks
 * otherwise, and a stage that does is told at synth what that costs.
 */
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { CDK_JSON, synthesize } from './synth';

const mappingsOf = (t: ReturnType<typeof synthesize>['stateless']) =>
  Object.values(t.findResources('AWS::Lambda::EventSourceMapping')).map((m) => m.Properties as Record<string, unknown>);

const warningsOf = (s: ReturnType<typeof synthesize>) =>
  s.stacks.consumers.flatMap((stack) =>
    Annotations.fromStack(stack)
      .findWarning('*', Match.stringLikeRegexp('maxRecordAgeSeconds'))
      .map((w) => String(w.entry.data)),
  );

describe('record age', () => {
  it.each(Object.keys(CDK_JSON.context.stages))('stage %s: no mapping sets a finite record age, and synth warns of none', (stage) => {
    const s = synthesize({ stage, bundle: false });
    const mappings = mappingsOf(s.stateless);
    expect(mappings.length).toBeGreaterThan(0);
    for (const m of mappings) expect(m).not.toHaveProperty('MaximumRecordAgeInSeconds');
    expect(warningsOf(s)).toEqual([]);
  });

  it('a stage that sets one gets it on its mappings, and a warning per consumer saying what it costs', () => {
    const s = synthesize({ stage: 'dev', bundle: false, overrides: { consumerDefaults: { maxRecordAgeSeconds: 21_600 } } });
    for (const m of mappingsOf(s.stateless)) expect(m.MaximumRecordAgeInSeconds).toBe(21_600);
    const warnings = warningsOf(s);
    expect(warnings).toHaveLength(s.config.consumers.length);
    expect(warnings[0]).toMatch(
      /^case-projection: maxRecordAgeSeconds is 21600 \(6\.0 h\)\. Its mappings send records older than that to the on-failure bucket before the ingest function sees them: .*ops reingest-failed.*Leave it unset to keep records of any age; retryAttempts still bounds a failing batch\./,
    );
  });
});
