/**
 * A stage's connection budget (cdk/connection-budget.ts): Aurora Serverless v2's
 * max_connections as AWS lists it for the maximum capacity, capped at 2,000 when the minimum
 * is 0.5 ACU or less, or the stage's declared value; what the functions of a stage can hold
 * at once; and a stage over it refused at synth, with the numbers and what to change.
 */
import { describe, expect, it } from 'vitest';
import { parseStageConfig, StageConfigError } from '../../cdk/config';
import { connectionBudget, serverlessV2MaxConnections } from '../../cdk/connection-budget';
import { CONSUMERS } from '../../functions/consumers/index';
import { manyConsumers } from './many-consumers';
import { CDK_JSON, EXISTING_CLUSTER } from './synth';

describe("Aurora Serverless v2's max_connections", () => {
  it.each([
    [1, 1, 189],
    [1, 4, 823],
    [1, 8, 1_669],
    [1, 16, 3_360],
    [1, 32, 5_000],
    [2, 256, 5_000],
  ])('at %s–%s ACU is AWS’s %s', (min, max, expected) => {
    expect(serverlessV2MaxConnections(min, max).value).toBe(expected);
  });

  it('between two of AWS’s rows, in proportion and rounded down: 2 ACU gives 400', () => {
    expect(serverlessV2MaxConnections(1, 2).value).toBe(400);
    expect(serverlessV2MaxConnections(1, 12).value).toBe(2_514);
  });

  it('is capped at 2,000 with a minimum of 0.5 ACU or less, and says so', () => {
    expect(serverlessV2MaxConnections(0.5, 16)).toEqual({
      value: 2_000,
      basis: 'Aurora Serverless v2 at 0.5–16 ACU: 3,360, capped at 2,000 with a minimum of 0.5 ACU or less',
    });
    expect(serverlessV2MaxConnections(0, 64).value).toBe(2_000);
    // Below the cap, the cap changes nothing.
    expect(serverlessV2MaxConnections(0.5, 4)).toEqual({ value: 823, basis: 'Aurora Serverless v2 at 0.5–4 ACU' });
  });
});

describe('the budget of the stages in cdk.json', () => {
  it('holds each of them, example-prod against the 2,000 it really has', () => {
    for (const stage of Object.keys(CDK_JSON.context.stages)) {
      const config = parseStageConfig(stage, CDK_JSON.context.stages[stage], CONSUMERS);
      const budget = connectionBudget(config);
      expect(budget.atDatabase, stage).toBeLessThanOrEqual(budget.limit);
    }
    const prod = connectionBudget(parseStageConfig('example-prod', CDK_JSON.context.stages['example-prod'], CONSUMERS));
    expect(prod.maxConnections.value).toBe(2_000);
    expect(prod.limit).toBe(1_600);
    // Behind RDS Proxy the writer sees the proxy's 75 % and the migration's one.
    expect(prod).toMatchObject({ proxyMaxConnectionsPercent: 75, atDatabase: Math.min(prod.peak - 1, 1_500) + 1 });
  });
});

describe('a stage over its budget', () => {
  const stage = (over: Record<string, unknown>) => ({ ...EXISTING_CLUSTER, ...over });

  it('is refused naming its largest shares, the limit and what to change', () => {
    const error = (() => {
      try {
        parseStageConfig('big', stage({ consumerDefaults: { maxPollers: 20 } }), manyConsumers(20));
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected a StageConfigError');
    })();
    expect(error).toBeInstanceOf(StageConfigError);
    // 23 consumers × 20 pollers × 5 = 2,300 ingest; 23 × 5 workers; the relay, reaper, ops and migration 9.
    expect(error.message).toContain(
      'stages.big: the functions can hold 2,424 connections at once (ingest 2,300, worker 115, …), over the budget of 658 (alarms.databaseConnectionsPercent of max_connections 823: Aurora Serverless v2 at 0.5–4 ACU).',
    );
  });

  it('fits when the stage declares the max_connections its parameter group sets', () => {
    const config = parseStageConfig(
      'big',
      stage({ consumerDefaults: { maxPollers: 20 }, database: { maxConnections: 4_000 } }),
      manyConsumers(20),
    );
    expect(connectionBudget(config)).toMatchObject({
      peak: 2_424,
      limit: 3_200,
      maxConnections: { value: 4_000, basis: 'declared (database.maxConnections)' },
    });
  });

  it('refuses the alarms key the declared value moved from', () => {
    expect(() => parseStageConfig('old', stage({ alarms: { databaseMaxConnections: 1_000 } }), CONSUMERS)).toThrow(
      /stages\.old\.alarms\.databaseMaxConnections: moved to database\.maxConnections/,
    );
  });
});
