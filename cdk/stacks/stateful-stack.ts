/**
 * What keeps state: the network, the Aurora PostgreSQL cluster and its secret, the
 * optional RDS Proxy, and (dev stages) a small MSK Serverless cluster. Deployed rarely,
 * separately from the functions, so a code change never puts the database at risk.
 */
import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as msk from 'aws-cdk-lib/aws-msk';
import * as rds from 'aws-cdk-lib/aws-rds';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { RUNTIME_ROLES } from '../../functions/lib/database-roles';
import { acknowledge } from '../constructs/nag';
import type { StageConfig } from '../config';

/** How often Secrets Manager rotates the master user's password. */
export const MASTER_SECRET_ROTATION_DAYS = 30;

/** Pinned: renaming a construct must never replace the database. */
export const DATABASE_CLUSTER_LOGICAL_ID = 'InboxDatabaseCluster';

export interface StatefulStackProps extends StackProps {
  config: StageConfig;
}

export class StatefulStack extends Stack {
  readonly vpc: ec2.Vpc;
  readonly functionSubnets: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PRIVATE_ISOLATED };
  /** Every function's security group: the database (or its proxy) admits it. */
  readonly functionSecurityGroup: ec2.SecurityGroup;
  readonly cluster: rds.DatabaseCluster;
  readonly databaseSecret: secretsmanager.ISecret;
  readonly proxy?: rds.DatabaseProxy;
  readonly mskClusterArn: string;
  private readonly endpoints: Record<string, ec2.InterfaceVpcEndpoint> = {};

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const { config } = props;

    // No NAT: the functions only talk to the database and to AWS APIs through endpoints.
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(config.network.cidr),
      maxAzs: config.network.maxAzs,
      natGateways: 0,
      subnetConfiguration: [{ name: 'private', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 22 }],
      flowLogs: { rejected: { trafficType: ec2.FlowLogTrafficType.REJECT } },
    });
    this.vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });

    this.functionSecurityGroup = new ec2.SecurityGroup(this, 'FunctionSecurityGroup', {
      vpc: this.vpc,
      description: 'Inbox functions: reach the database and the VPC endpoints',
      allowAllOutbound: true,
    });

    // Secrets Manager: the migration function reads the master secret, and its rotation runs
    // here. Scheduler: ops pause/resume.
    // STS and Lambda: the MSK event-source mapping's pollers, when the cluster is in this VPC,
    // assume the function's role for IAM auth and invoke the function from its subnets.
    // Lambda also: the ingest functions wake their workers, and workers fan out (Invoke).
    // Closed endpoints: only the security groups admitted below reach them.
    const services: Record<string, ec2.InterfaceVpcEndpointAwsService> = {
      SecretsManager: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      Scheduler: new ec2.InterfaceVpcEndpointAwsService('scheduler'),
      Sts: ec2.InterfaceVpcEndpointAwsService.STS,
      Lambda: ec2.InterfaceVpcEndpointAwsService.LAMBDA,
    };
    for (const [name, service] of Object.entries(services)) {
      const endpoint = this.vpc.addInterfaceEndpoint(name, { service, privateDnsEnabled: true, subnets: this.functionSubnets, open: false });
      endpoint.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Inbox functions');
      this.endpoints[name] = endpoint;
    }

    const version = config.database.engineVersion;
    this.cluster = new rds.DatabaseCluster(this, 'Database', {
      engine: rds.DatabaseClusterEngine.auroraPostgres({
        version: rds.AuroraPostgresEngineVersion.of(version, version.split('.')[0]!),
      }),
      credentials: rds.Credentials.fromGeneratedSecret('inbox_admin'),
      defaultDatabaseName: config.database.databaseName,
      // Performance Insights is on for the cluster; said per instance too, or the CDK warns
      // that an instance "disables" what the cluster turns on for it anyway.
      writer: rds.ClusterInstance.serverlessV2('writer', { publiclyAccessible: false, enablePerformanceInsights: true }),
      readers: Array.from({ length: config.database.readers }, (_, i) =>
        rds.ClusterInstance.serverlessV2(`reader${i + 1}`, { scaleWithWriter: true, publiclyAccessible: false, enablePerformanceInsights: true }),
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
      enablePerformanceInsights: true,
      // The runtime functions log in as their own roles with IAM tokens (rds_iam, granted
      // by migrations/0045): no password of theirs exists anywhere.
      iamAuthentication: true,
    });
    (this.cluster.node.defaultChild as rds.CfnDBCluster).overrideLogicalId(DATABASE_CLUSTER_LOGICAL_ID);
    this.databaseSecret = this.cluster.secret!;

    // Only the migration function reads the master secret, and it reads it on every
    // invocation: rotation cannot strand a running function with an old password.
    const rotationSecurityGroup = new ec2.SecurityGroup(this, 'SecretRotationSecurityGroup', {
      vpc: this.vpc,
      description: 'Master secret rotation function: reaches the database and Secrets Manager',
      allowAllOutbound: true,
    });
    this.endpoints.SecretsManager!.connections.allowDefaultPortFrom(rotationSecurityGroup, 'Master secret rotation');
    this.cluster.addRotationSingleUser({
      automaticallyAfter: Duration.days(MASTER_SECRET_ROTATION_DAYS),
      // On its schedule only, not as a side effect of a deploy: a rotation racing the
      // deploy's migration run could hand it a password that is about to change.
      rotateImmediatelyOnUpdate: false,
      vpcSubnets: this.functionSubnets,
      securityGroup: rotationSecurityGroup,
    });

    if (config.database.rdsProxy) {
      // End-to-end IAM authentication: the functions sign tokens for the proxy, and the
      // proxy signs its own for the database with its role, which may connect as the
      // runtime roles and nothing else (not as the master user: it holds no secret).
      const proxyRole = new iam.Role(this, 'ProxyRole', {
        assumedBy: new iam.ServicePrincipal('rds.amazonaws.com'),
        description: 'RDS Proxy: connects to Aurora as the inbox functions\' roles (IAM authentication)',
      });
      for (const role of RUNTIME_ROLES) this.cluster.grantConnect(proxyRole, role);
      this.proxy = this.cluster.addProxy('Proxy', {
        defaultAuthScheme: rds.DefaultAuthScheme.IAM_AUTH,
        role: proxyRole,
        vpc: this.vpc,
        vpcSubnets: this.functionSubnets,
        requireTLS: true,
        // Long enough for a worker's drain loop; short enough that a frozen container's
        // connection does not hold a database backend for long.
        idleClientTimeout: Duration.minutes(15),
      });
      this.proxy.connections.allowFrom(this.functionSecurityGroup, ec2.Port.tcp(this.cluster.clusterEndpoint.port), 'Inbox functions to RDS Proxy');
      // The migration runner connects to the cluster directly (DDL, the master user).
      this.cluster.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Migration runner to Aurora');
    } else {
      this.cluster.connections.allowDefaultPortFrom(this.functionSecurityGroup, 'Inbox functions to Aurora');
    }

    this.mskClusterArn = config.msk.clusterArn ?? this.createDevCluster(config);

    this.suppressFindings(config);
  }

  /** A small MSK Serverless cluster with IAM auth, for stages that have no cluster of their own. */
  private createDevCluster(config: StageConfig): string {
    const securityGroup = new ec2.SecurityGroup(this, 'DevKafkaSecurityGroup', {
      vpc: this.vpc,
      description: 'Dev MSK Serverless cluster; the event-source mapping pollers run in this group',
      allowAllOutbound: true,
    });
    // The ESM's pollers use the cluster's own security group: it must admit itself (IAM port).
    securityGroup.addIngressRule(securityGroup, ec2.Port.tcp(9098), 'MSK IAM from the ESM pollers');
    // The outbox relay runs in the functions' group and produces to the brokers.
    securityGroup.addIngressRule(this.functionSecurityGroup, ec2.Port.tcp(9098), 'MSK IAM from the outbox relay');
    for (const endpoint of Object.values(this.endpoints)) endpoint.connections.allowDefaultPortFrom(securityGroup, 'MSK event-source mapping pollers');
    // A mapping with a Glue schema registry fetches schemas from the pollers' subnets; the
    // functions never call Glue, so only the pollers' group is admitted.
    if (config.consumers.some((c) => c.schemaRegistry?.type === 'glue')) {
      const glue = this.vpc.addInterfaceEndpoint('Glue', {
        service: ec2.InterfaceVpcEndpointAwsService.GLUE,
        privateDnsEnabled: true,
        subnets: this.functionSubnets,
        open: false,
      });
      glue.connections.allowDefaultPortFrom(securityGroup, 'MSK event-source mapping pollers: Glue schema registry');
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
    if (!config.database.deletionProtection) {
      acknowledge(this.cluster, [
        { id: 'AwsSolutions-RDS10', reason: 'Deletion protection is switched off explicitly in this stage context (throwaway stage).' },
      ]);
    }
  }
}
