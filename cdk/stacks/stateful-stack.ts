/**
 * What keeps state: the network (created, or an existing VPC imported by id), the Aurora
 * PostgreSQL cluster and its secret, the optional RDS Proxy, and (dev stages) a small MSK
 * Serverless cluster. Deployed rarely, separately from the functions, so a code change
 * never puts the database at risk. The other stacks of the stage read what they need of it
 * from SSM parameters (stage-references.ts), never from exports.
 */
import { type CfnResource, Duration, Fn, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as msk from 'aws-cdk-lib/aws-msk';
import * as rds from 'aws-cdk-lib/aws-rds';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as sam from 'aws-cdk-lib/aws-sam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { operatorRole, runtimeRoles } from '../../functions/lib/database-roles';
import { proxyMaxConnectionsPercent } from '../connection-budget';
import { acknowledgeLogRetentionProvider, retainDefaultLogGroup, retentionDays } from '../constructs/log-retention';
import { acknowledge } from '../constructs/nag';
import type { InterfaceEndpoint, StageConfig } from '../config';
import { importVpc, kafkaArnPrefixes, writeStatefulParameters } from './stage-references';

/** How often Secrets Manager rotates the master user's password. */
export const MASTER_SECRET_ROTATION_DAYS = 30;

/** Pinned: renaming a construct must never replace the database. */
export const DATABASE_CLUSTER_LOGICAL_ID = 'InboxDatabaseCluster';

export interface StatefulStackProps extends StackProps {
  config: StageConfig;
}

export class StatefulStack extends Stack {
  readonly vpc: ec2.IVpc;
  readonly functionSubnets: ec2.SubnetSelection;
  /** Every function's security group: the database (or its proxy) and the endpoints admit it. */
  readonly functionSecurityGroup: ec2.SecurityGroup;
  /** The outbox relay's second group, and the only one the brokers admit. */
  readonly kafkaClientSecurityGroup: ec2.SecurityGroup;
  readonly cluster: rds.DatabaseCluster;
  readonly databaseSecret: secretsmanager.ISecret;
  readonly proxy?: rds.DatabaseProxy;
  readonly mskClusterArn: string;
  private readonly endpoints: Partial<Record<InterfaceEndpoint, ec2.InterfaceVpcEndpoint>> = {};
  private readonly config: StageConfig;

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const { config } = props;
    this.config = config;

    this.vpc = this.createOrImportNetwork(config);
    this.functionSubnets =
      config.network.kind === 'existing' ? { subnets: this.vpc.privateSubnets } : { subnets: this.vpc.isolatedSubnets };
    this.functionSecurityGroup = this.createFunctionSecurityGroup();
    this.kafkaClientSecurityGroup = this.createKafkaClientSecurityGroup();
    this.addInterfaceEndpoints(config);

    this.cluster = this.createDatabase(config);
    this.databaseSecret = this.cluster.secret!;
    this.addSecretRotation(config);
    const connect = this.connectFunctionsToDatabase(config);
    this.proxy = connect.proxy;

    this.mskClusterArn = config.msk.clusterArn ?? this.createDevCluster(config);
    this.admitRelayToExistingCluster(config);

    writeStatefulParameters(this, config, {
      vpcId: this.vpc.vpcId,
      subnetIds: Fn.join(',', this.vpc.selectSubnets(this.functionSubnets).subnetIds),
      functionSecurityGroupId: this.functionSecurityGroup.securityGroupId,
      kafkaClientSecurityGroupId: this.kafkaClientSecurityGroup.securityGroupId,
      clusterIdentifier: this.cluster.clusterIdentifier,
      connectHost: connect.host,
      connectPort: this.cluster.clusterEndpoint.port.toString(),
      connectResourceId: connect.resourceId,
      masterSecretArn: this.databaseSecret.secretArn,
      kafkaClusterArn: this.mskClusterArn,
      kafkaTopicArnPrefix: kafkaArnPrefixes(this.mskClusterArn).topic,
      kafkaGroupArnPrefix: kafkaArnPrefixes(this.mskClusterArn).group,
    });

    this.suppressFindings(config);
  }

  private createFunctionSecurityGroup(): ec2.SecurityGroup {
    return new ec2.SecurityGroup(this, 'FunctionSecurityGroup', {
      vpc: this.vpc,
      description: 'Inbox functions: reach the database and the VPC endpoints',
      allowAllOutbound: true,
    });
  }

  private createKafkaClientSecurityGroup(): ec2.SecurityGroup {
    return new ec2.SecurityGroup(this, 'KafkaClientSecurityGroup', {
      vpc: this.vpc,
      description: 'Inbox functions that produce to Kafka (the outbox relay): the brokers admit this group',
      allowAllOutbound: true,
    });
  }

  /**
   * Only what the functions call, each admitting the functions' group: Secrets Manager (the
   * migration function reads the master secret, and its rotation runs here), Lambda (wake-ups,
   * fan-out, ops pause --ingest), Scheduler (ops pause/resume). The event-source mappings in
   * provisioned mode need none: they reach the brokers through the cluster's own network.
   */
  private addInterfaceEndpoints(config: StageConfig): void {
    const services: Record<InterfaceEndpoint, { id: string; service: ec2.IInterfaceVpcEndpointService }> = {
      secretsmanager: { id: 'SecretsManager', service: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER },
      scheduler: { id: 'Scheduler', service: new ec2.InterfaceVpcEndpointAwsService('scheduler') },
      lambda: { id: 'Lambda', service: ec2.InterfaceVpcEndpointAwsService.LAMBDA },
    };
    for (const name of config.network.interfaceEndpoints) {
      const { id: endpointId, service } = services[name];
      const endpoint = this.vpc.addInterfaceEndpoint(endpointId, {
        service,
        privateDnsEnabled: true,
        subnets: this.functionSubnets,
        open: false,
      });
      endpoint.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Inbox functions');
      this.endpoints[name] = endpoint;
    }
  }

  /** The Aurora PostgreSQL Serverless v2 cluster, its logical id pinned. */
  private createDatabase(config: StageConfig): rds.DatabaseCluster {
    const version = config.database.engineVersion;
    const cluster = new rds.DatabaseCluster(this, 'Database', {
      engine: rds.DatabaseClusterEngine.auroraPostgres({
        version: rds.AuroraPostgresEngineVersion.of(version, version.split('.')[0]!),
      }),
      credentials: rds.Credentials.fromGeneratedSecret('inbox_admin'),
      defaultDatabaseName: config.database.databaseName,
      // Performance Insights is on for the cluster; said per instance too, or the CDK warns
      // that an instance "disables" what the cluster turns on for it anyway.
      writer: rds.ClusterInstance.serverlessV2('writer', { publiclyAccessible: false, enablePerformanceInsights: true }),
      readers: Array.from({ length: config.database.readers }, (_, i) =>
        rds.ClusterInstance.serverlessV2(`reader${i + 1}`, {
          scaleWithWriter: true,
          publiclyAccessible: false,
          enablePerformanceInsights: true,
        }),
      ),
      serverlessV2MinCapacity: config.database.minCapacityAcu,
      serverlessV2MaxCapacity: config.database.maxCapacityAcu,
      vpc: this.vpc,
      vpcSubnets: this.functionSubnets,
      storageEncrypted: true,
      backup: { retention: Duration.days(config.database.backupRetentionDays) },
      deletionProtection: config.database.deletionProtection,
      removalPolicy: RemovalPolicy.SNAPSHOT,
      cloudwatchLogsExports: ['postgresql'],
      // Aurora creates the exported log's group itself, never expiring: a log-retention
      // custom resource sets the stage's retention on it.
      cloudwatchLogsRetention: retentionDays(config.database.logRetentionDays),
      enablePerformanceInsights: true,
      // The runtime functions log in as their own roles with IAM tokens (rds_iam, granted
      // by migrations/0045): no password of theirs exists anywhere.
      iamAuthentication: true,
    });
    (cluster.node.defaultChild as rds.CfnDBCluster).overrideLogicalId(DATABASE_CLUSTER_LOGICAL_ID);
    return cluster;
  }

  /**
   * Only the migration function reads the master secret, and it reads it on every
   * invocation: rotation cannot strand a running function with an old password.
   */
  private addSecretRotation(config: StageConfig): void {
    const rotationSecurityGroup = new ec2.SecurityGroup(this, 'SecretRotationSecurityGroup', {
      vpc: this.vpc,
      description: 'Master secret rotation function: reaches the database and Secrets Manager',
      allowAllOutbound: true,
    });
    this.endpoints.secretsmanager?.connections.allowDefaultPortFrom(rotationSecurityGroup, 'Master secret rotation');
    const rotation = this.cluster.addRotationSingleUser({
      automaticallyAfter: Duration.days(MASTER_SECRET_ROTATION_DAYS),
      // On its schedule only, not as a side effect of a deploy: a rotation racing the
      // deploy's migration run could hand it a password that is about to change.
      rotateImmediatelyOnUpdate: false,
      vpcSubnets: this.functionSubnets,
      securityGroup: rotationSecurityGroup,
    });
    // The rotation function comes from the Serverless Application Repository, with a log
    // group Lambda creates on its first run; its name is the application's parameter.
    const application = rotation.node.findChild('Resource') as sam.CfnApplication;
    const rotationFunctionName = (application.parameters as Record<string, string>).functionName!;
    retainDefaultLogGroup(this, 'RotationFunctionLogRetention', rotationFunctionName, config.observability.logRetentionDays);
  }

  /**
   * Admits the functions to the database, directly or through RDS Proxy, and returns where
   * they connect: the host and the resource id of their rds-db:connect ARNs.
   */
  private connectFunctionsToDatabase(config: StageConfig): { host: string; resourceId: string; proxy?: rds.DatabaseProxy } {
    if (config.database.rdsProxy) {
      // End-to-end IAM authentication: the functions sign tokens for the proxy, and the
      // proxy signs its own for the database with its role, which may connect as the
      // runtime roles (the cross-consumer functions' and each stage consumer's own) and nothing
      // else (not as the master user: it holds no secret).
      const proxyRole = new iam.Role(this, 'ProxyRole', {
        assumedBy: new iam.ServicePrincipal('rds.amazonaws.com'),
        description: "RDS Proxy: connects to Aurora as the inbox functions' roles (IAM authentication)",
      });
      for (const role of runtimeRoles(config.consumers)) this.cluster.grantConnect(proxyRole, role);
      // The operators connect through it too, as their own roles (docs/ops.md, "Who did it").
      for (const operator of config.operators) this.cluster.grantConnect(proxyRole, operatorRole(operator.name));
      const proxy = this.cluster.addProxy('Proxy', {
        defaultAuthScheme: rds.DefaultAuthScheme.IAM_AUTH,
        role: proxyRole,
        vpc: this.vpc,
        vpcSubnets: this.functionSubnets,
        requireTLS: true,
        // Long enough for a worker's drain loop; short enough that a frozen container's
        // connection does not hold a database backend for long.
        idleClientTimeout: Duration.minutes(15),
        // Within the stage's connection budget, leaving room for the migration function and
        // operators, who connect directly (cdk/connection-budget.ts).
        maxConnectionsPercent: proxyMaxConnectionsPercent(config),
      });
      proxy.connections.allowFrom(
        this.functionSecurityGroup,
        ec2.Port.tcp(this.cluster.clusterEndpoint.port),
        'Inbox functions to RDS Proxy',
      );
      // The migration runner connects to the cluster directly (DDL, the master user).
      this.cluster.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Migration runner to Aurora');
      // prx-<id>: the last part of the proxy's ARN, the resource id of its rds-db:connect ARNs.
      return { host: proxy.endpoint, resourceId: Fn.select(6, Fn.split(':', proxy.dbProxyArn)), proxy };
    }
    this.cluster.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Inbox functions to Aurora');
    return { host: this.cluster.clusterEndpoint.hostname, resourceId: this.cluster.clusterResourceIdentifier };
  }

  /** The outbox relay's group admitted to an existing cluster's brokers, when the stage names their group. */
  private admitRelayToExistingCluster(config: StageConfig): void {
    if (config.msk.securityGroupId !== undefined && relayDeployed(config)) {
      // The outbox relay produces to the existing cluster: its group is admitted on the IAM
      // broker port, and nothing else of this stage is.
      const brokers = ec2.SecurityGroup.fromSecurityGroupId(this, 'ExistingKafkaSecurityGroup', config.msk.securityGroupId, {
        mutable: true,
      });
      brokers.addIngressRule(this.kafkaClientSecurityGroup, ec2.Port.tcp(MSK_IAM_PORT), 'MSK IAM from the inbox outbox relay');
    }
  }

  /**
   * The zones of the created VPC, as the stage gives them: with an explicit account and
   * region, CDK would otherwise look them up in the account, which synth cannot do offline.
   */
  override get availabilityZones(): string[] {
    return this.config?.network.availabilityZones ?? super.availabilityZones;
  }

  /** A VPC of its own (isolated subnets, no NAT), or the existing one the stage names, imported by id. */
  private createOrImportNetwork(config: StageConfig): ec2.IVpc {
    const network = config.network;
    if (network.kind === 'existing') {
      return importVpc(this, { vpcId: network.vpcId, availabilityZones: network.availabilityZones, privateSubnetIds: network.subnetIds });
    }
    const flowLogs = new logs.LogGroup(this, 'FlowLogs', {
      retention: retentionDays(network.flowLogRetentionDays),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // No NAT: the functions only talk to the database and to AWS APIs through endpoints.
    const vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(network.cidr),
      maxAzs: network.maxAzs,
      natGateways: 0,
      subnetConfiguration: [{ name: 'private', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 22 }],
      flowLogs: {
        rejected: { trafficType: ec2.FlowLogTrafficType.REJECT, destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs) },
      },
    });
    // S3: the event-source mappings' pollers write batches they give up on to the on-failure
    // bucket from the cluster's subnets.
    vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
    // The default security group's rules are removed by a CDK custom resource; its function's
    // log group gets the stage's retention too.
    const restrictProvider = this.node.tryFindChild('Custom::VpcRestrictDefaultSGCustomResourceProvider');
    const handler = restrictProvider?.node.tryFindChild('Handler') as CfnResource | undefined;
    if (handler !== undefined)
      retainDefaultLogGroup(this, 'RestrictDefaultSecurityGroupLogRetention', handler.ref, config.observability.logRetentionDays);
    return vpc;
  }

  /** A small MSK Serverless cluster with IAM auth, for stages that have no cluster of their own. */
  private createDevCluster(config: StageConfig): string {
    const securityGroup = new ec2.SecurityGroup(this, 'DevKafkaSecurityGroup', {
      vpc: this.vpc,
      description: 'Dev MSK Serverless cluster; the event-source mapping pollers run in this group',
      allowAllOutbound: true,
    });
    // The ESM's pollers use the cluster's own security group: it must admit itself (IAM port).
    securityGroup.addIngressRule(securityGroup, ec2.Port.tcp(MSK_IAM_PORT), 'MSK IAM from the ESM pollers');
    // The outbox relay produces to the brokers from its Kafka client group.
    if (relayDeployed(config)) {
      securityGroup.addIngressRule(this.kafkaClientSecurityGroup, ec2.Port.tcp(MSK_IAM_PORT), 'MSK IAM from the outbox relay');
    }
    // A consumer with a Glue schema registry reads schemas twice: its mapping's pollers
    // (validation, JSON conversion) and its ingest function (decoding a SOURCE-format value by
    // its writer schema). Both reach Glue through this endpoint; nothing else is admitted.
    if (config.consumers.some((c) => c.schemaRegistry?.type === 'glue')) {
      const glue = this.vpc.addInterfaceEndpoint('Glue', {
        service: ec2.InterfaceVpcEndpointAwsService.GLUE,
        privateDnsEnabled: true,
        subnets: this.functionSubnets,
        open: false,
      });
      glue.connections.allowDefaultPortFrom(securityGroup, 'MSK event-source mapping pollers: Glue schema registry');
      glue.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Ingest functions: Glue schema registry');
    }
    const cluster = new msk.CfnServerlessCluster(this, 'DevKafka', {
      clusterName: `${this.stackName}-dev`.slice(0, 64),
      clientAuthentication: { sasl: { iam: { enabled: true } } },
      vpcConfigs: [
        {
          subnetIds: this.vpc.selectSubnets(this.functionSubnets).subnetIds,
          securityGroups: [securityGroup.securityGroupId],
        },
      ],
    });
    return cluster.attrArn;
  }

  private suppressFindings(config: StageConfig): void {
    acknowledgeLogRetentionProvider(this);
    if (!config.database.deletionProtection) {
      acknowledge(this.cluster, [
        { id: 'AwsSolutions-RDS10', reason: 'Deletion protection is switched off explicitly in this stage context (throwaway stage).' },
      ]);
    }
  }
}

/** MSK's broker port for IAM authentication (SASL/OAUTHBEARER over TLS). */
export const MSK_IAM_PORT = 9098;

/** The outbox relay is deployed when some consumer of the stage emits events. */
export function relayDeployed(config: StageConfig): boolean {
  return config.consumers.some((c) => c.outboxTopics.length > 0);
}
