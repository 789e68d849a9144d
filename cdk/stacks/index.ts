/** The two stacks of one stage, built from its validated configuration. */
import type { App } from 'aws-cdk-lib';
import type { StageConfig } from '../config';
import { StatefulStack } from './stateful-stack';
import { StatelessStack } from './stateless-stack';

export interface InboxStacks {
  stateful: StatefulStack;
  stateless: StatelessStack;
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
  const stateless = new StatelessStack(app, `${base}-stateless`, {
    ...(env ? { env } : {}),
    config,
    tags,
    description: 'Kafka inbox: functions, event-source mappings, schedules, migrations, dashboard, alarms',
  });
  // It reads the stateful stack's parameters when it deploys: `cdk deploy --all` deploys that one first.
  stateless.addStackDependency(stateful, 'reads the SSM parameters the stateful stack writes');
  return { stateful, stateless };
}
