/**
 * The stacks of one stage, built from its validated configuration: the stateful stack, the
 * platform stack, and one consumer stack per stack key the consumers chose (docs/stacks.md).
 */
import type { App } from 'aws-cdk-lib';
import type { ConsumerStageConfig, StageConfig } from '../config';
import { ConsumerStack } from './consumer-stack';
import { PlatformStack } from './platform-stack';
import { StatefulStack } from './stateful-stack';

export interface InboxStacks {
  stateful: StatefulStack;
  platform: PlatformStack;
  /** By stack key, in the order of the keys. */
  consumers: ConsumerStack[];
}

/** `<prefix>-<stage>-consumers-<key>` */
export function consumerStackName(config: Pick<StageConfig, 'stackPrefix' | 'stage'>, key: string): string {
  return `${config.stackPrefix}-${config.stage}-consumers-${key}`;
}

export function createInboxStacks(app: App, config: StageConfig): InboxStacks {
  const env = config.account !== undefined && config.region !== undefined ? { account: config.account, region: config.region } : undefined;
  const base = `${config.stackPrefix}-${config.stage}`;
  const tags = { project: 'kafka-inbox', stage: config.stage };
  const stateful = new StatefulStack(app, `${base}-stateful`, {
    ...(env ? { env } : {}),
    config,
    tags,
    terminationProtection: config.database.deletionProtection,
    description: 'Kafka inbox: network, Aurora PostgreSQL, optional RDS Proxy and dev MSK cluster',
  });
  const platform = new PlatformStack(app, `${base}-stateless`, {
    ...(env ? { env } : {}),
    config,
    tags,
    description:
      'Kafka inbox platform: shared functions (reaper, ops, relay, migrations), buckets, queues, schedule group, alarm topic, overview dashboard',
  });
  // It reads the stateful stack's parameters when it deploys: `cdk deploy --all` deploys that one first.
  platform.addStackDependency(stateful, 'reads the SSM parameters the stateful stack writes');

  const byKey = new Map<string, ConsumerStageConfig[]>();
  for (const c of config.consumers) byKey.set(c.stack, [...(byKey.get(c.stack) ?? []), c]);
  const consumers = [...byKey.keys()].sort().map((key) => {
    const stack = new ConsumerStack(app, consumerStackName(config, key), {
      ...(env ? { env } : {}),
      config,
      key,
      consumers: byKey.get(key)!,
      tags,
      description: `Kafka inbox consumer stack ${key}: the functions, mappings, schedules, alarms and dashboard of its consumers`,
    });
    // It reads the platform's parameters, and its functions need the migrated schema.
    stack.addStackDependency(platform, 'reads the SSM parameters the platform stack writes; the migrations run first');
    return stack;
  });
  return { stateful, platform, consumers };
}
