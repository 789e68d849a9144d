/**
 * What the other stacks of a stage use of the stateful stack, passed through SSM parameters
 * under `/<stackPrefix>/<stage>/stateful/` instead of CloudFormation exports.
 *
 * An export cannot be removed, nor its value changed, while another stack imports it: turning
 * RDS Proxy on (the functions move to the proxy's endpoint) or leaving the dev cluster for an
 * existing one would remove exports the deployed stateless stack imports, and CloudFormation
 * refuses the stateful update. A parameter couples nothing: the stateful stack writes the same
 * names whatever the stage's toggles, with the values of the moment, and each consuming stack
 * reads them when it deploys (a CloudFormation parameter of type
 * `AWS::SSM::Parameter::Value<String>`, resolved by CloudFormation: synth makes no call, and
 * `cdk deploy` never skips a stack that has one). Any number of consuming stacks can read the
 * same names, and an operator finds the stage's endpoints with one
 * `aws ssm get-parameters-by-path --path /<prefix>/<stage>/stateful/`.
 *
 * What the configuration states (an existing VPC's ids, an existing cluster's ARN) is used
 * as a literal by every stack; the parameters carry what only exists once deployed.
 */
import { Annotations, ArnFormat, Aws, Fn, Lazy, Stack, Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as rds from 'aws-cdk-lib/aws-rds';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import type { StageConfig } from '../config';

/**
 * Every parameter the stateful stack writes, always all of them: a consuming stack deployed
 * before a toggle must find every name it reads after it (test/cdk/stage-changes.test.ts).
 */
export const STATEFUL_PARAMETERS = {
  vpcId: 'network/vpc-id',
  /** Comma-separated, in the order of the availability zones. */
  subnetIds: 'network/subnet-ids',
  functionSecurityGroupId: 'network/function-security-group-id',
  kafkaClientSecurityGroupId: 'network/kafka-client-security-group-id',
  clusterIdentifier: 'database/cluster-identifier',
  /** Where the runtime functions connect: RDS Proxy's endpoint when there is one, else the cluster's writer endpoint. */
  connectHost: 'database/connect-host',
  connectPort: 'database/connect-port',
  /** The resource id in their rds-db:connect ARNs: the proxy's (prx-…) or the cluster's (cluster-…). */
  connectResourceId: 'database/connect-resource-id',
  masterSecretArn: 'database/master-secret-arn',
  kafkaClusterArn: 'kafka/cluster-arn',
  /** The cluster's topic and group ARNs without the name: `arn:…:topic/<cluster>/<uuid>`. */
  kafkaTopicArnPrefix: 'kafka/topic-arn-prefix',
  kafkaGroupArnPrefix: 'kafka/group-arn-prefix',
} as const;

export type StatefulParameter = keyof typeof STATEFUL_PARAMETERS;

/** The parameter's name for a stage: `/KafkaInbox/dev/stateful/database/connect-host`. */
export function statefulParameterName(config: Pick<StageConfig, 'stackPrefix' | 'stage'>, key: StatefulParameter): string {
  return `/${config.stackPrefix}/${config.stage}/stateful/${STATEFUL_PARAMETERS[key]}`;
}

/** The stateful stack's side: one parameter per key, every key required. */
export function writeStatefulParameters(scope: Construct, config: StageConfig, values: Record<StatefulParameter, string>): void {
  for (const key of Object.keys(STATEFUL_PARAMETERS) as StatefulParameter[]) {
    new ssm.StringParameter(scope, `Parameter-${key}`, {
      parameterName: statefulParameterName(config, key),
      stringValue: values[key],
      description: `Kafka inbox ${config.stage}: ${STATEFUL_PARAMETERS[key]} of the stateful stack, read by the stage's other stacks at deploy time`,
    });
  }
}

/** A cluster's topic and group ARNs up to the name: append `/<topic>` or `/<group>`. */
export interface KafkaArnPrefixes {
  topic: string;
  group: string;
}

/**
 * The topic and group ARN prefixes of a cluster ARN (arn:…:cluster/<name>/<uuid>). A
 * literal ARN (an existing cluster) is parsed here. A token is the dev cluster's, created in
 * the stateful stack's own account and region: its name and uuid come from one Fn::Split,
 * the rest from the pseudo parameters. Even so the expression is repeated wherever it is
 * used, so it is built once, in the stateful stack, and read by the others as parameters.
 */
export function kafkaArnPrefixes(clusterArn: string): KafkaArnPrefixes {
  if (!Token.isUnresolved(clusterArn)) {
    const match = /^arn:([^:]+):kafka:([^:]+):(\d{12}):cluster\/([^/]+)\/([^/]+)$/.exec(clusterArn);
    if (match === null) throw new Error(`not an MSK cluster ARN: ${clusterArn}`);
    const [, partition, region, account, name, uuid] = match;
    const prefix = `arn:${partition}:kafka:${region}:${account}`;
    return { topic: `${prefix}:topic/${name}/${uuid}`, group: `${prefix}:group/${name}/${uuid}` };
  }
  const parts = Fn.split('/', clusterArn, 3);
  const cluster = `${Fn.select(1, parts)}/${Fn.select(2, parts)}`;
  const prefix = `arn:${Aws.PARTITION}:kafka:${Aws.REGION}:${Aws.ACCOUNT_ID}`;
  return { topic: `${prefix}:topic/${cluster}`, group: `${prefix}:group/${cluster}` };
}

/** Where and how the runtime functions reach the database. */
export interface DatabaseConnection {
  hostname: string;
  port: string;
  /** The resource id of the rds-db:connect ARN (the proxy's or the cluster's). */
  resourceId: string;
  /** Through RDS Proxy: no named prepared statements (they pin a session), Amazon's public roots for TLS. */
  viaProxy: boolean;
}

/**
 * rds-db:connect as one database user on the endpoint the functions use, the ARN CDK's own
 * grantConnect builds (`dbuser:<resource id>/<user>`), from the resource id alone: the same
 * statement serves the cluster and the proxy.
 */
export function grantConnect(grantee: iam.IGrantable, connection: DatabaseConnection, databaseUser: string): iam.Grant {
  return iam.Grant.addToPrincipal({
    grantee,
    actions: ['rds-db:connect'],
    resourceArns: [
      Stack.of(grantee as unknown as Construct).formatArn({
        service: 'rds-db',
        resource: 'dbuser',
        resourceName: `${connection.resourceId}/${databaseUser}`,
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      }),
    ],
  });
}

/**
 * The consuming side: the stateful stack's resources as this stack sees them, imported from
 * the configuration's literals or from the parameters. Nothing here adds a rule or a policy
 * to a stateful resource.
 */
export class StatefulReferences extends Construct {
  readonly vpc: ec2.IVpc;
  readonly subnets: ec2.SubnetSelection;
  readonly functionSecurityGroup: ec2.ISecurityGroup;
  /** The outbox relay's extra group: the cluster admits it on the IAM broker port. */
  readonly kafkaClientSecurityGroup: ec2.ISecurityGroup;
  /** For its metrics (DBClusterIdentifier). */
  readonly cluster: rds.IDatabaseCluster;
  readonly masterSecret: secretsmanager.ISecret;
  readonly connection: DatabaseConnection;
  readonly mskClusterArn: string;
  readonly kafkaArnPrefixes: KafkaArnPrefixes;

  constructor(scope: Construct, id: string, config: StageConfig) {
    super(scope, id);
    // Each parameter is read only if something renders it: a stack that does not use one
    // (a consumer stack has no secret, no relay) must not declare it (an unused parameter is
    // a template warning).
    const read = (key: StatefulParameter) =>
      Lazy.string({ produce: () => ssm.StringParameter.valueForStringParameter(this, statefulParameterName(config, key)) });

    const network = config.network;
    if (network.kind === 'existing') {
      this.vpc = importVpc(this, {
        vpcId: network.vpcId,
        availabilityZones: network.availabilityZones,
        privateSubnetIds: network.subnetIds,
      });
      this.subnets = { subnets: this.vpc.privateSubnets };
    } else {
      const zones = network.maxAzs;
      this.vpc = importVpc(this, {
        // Read only if something renders it: a function's VpcConfig names subnets and groups,
        // not the VPC, and an unused parameter is a template warning.
        vpcId: read('vpcId'),
        // Only the subnets' ids reach the template; their zones are not used by anything here.
        availabilityZones: network.availabilityZones ?? Array.from({ length: zones }, (_, i) => Fn.select(i, Fn.getAzs())),
        isolatedSubnetIds: Fn.split(',', read('subnetIds'), zones),
      });
      this.subnets = { subnets: this.vpc.isolatedSubnets };
    }
    this.functionSecurityGroup = ec2.SecurityGroup.fromSecurityGroupId(this, 'FunctionSecurityGroup', read('functionSecurityGroupId'), {
      mutable: false,
    });
    this.kafkaClientSecurityGroup = ec2.SecurityGroup.fromSecurityGroupId(
      this,
      'KafkaClientSecurityGroup',
      read('kafkaClientSecurityGroupId'),
      { mutable: false },
    );

    this.cluster = rds.DatabaseCluster.fromDatabaseClusterAttributes(this, 'Database', { clusterIdentifier: read('clusterIdentifier') });
    this.masterSecret = secretsmanager.Secret.fromSecretCompleteArn(this, 'MasterSecret', read('masterSecretArn'));
    this.connection = {
      hostname: read('connectHost'),
      port: read('connectPort'),
      resourceId: read('connectResourceId'),
      viaProxy: config.database.rdsProxy,
    };
    this.mskClusterArn = config.msk.clusterArn ?? read('kafkaClusterArn');
    this.kafkaArnPrefixes =
      config.msk.clusterArn !== undefined
        ? kafkaArnPrefixes(config.msk.clusterArn)
        : { topic: read('kafkaTopicArnPrefix'), group: read('kafkaGroupArnPrefix') };
  }
}

/**
 * A VPC by id, without a lookup. Its subnets come without route tables, which nothing of the
 * stage reads (functions, the database and endpoints name subnets only): CDK's warning about
 * them is answered here.
 */
export function importVpc(scope: Construct, attributes: ec2.VpcAttributes): ec2.IVpc {
  const vpc = ec2.Vpc.fromVpcAttributes(scope, 'Vpc', attributes);
  for (const subnet of [...vpc.privateSubnets, ...vpc.isolatedSubnets]) {
    Annotations.of(subnet).acknowledgeWarning(
      '@aws-cdk/aws-ec2:noSubnetRouteTableId',
      "Nothing in this stage reads an imported subnet's route table: functions, the database and endpoints name the subnet only.",
    );
  }
  return vpc;
}
