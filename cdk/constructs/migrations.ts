/**
 * The deploy-time migration run: a function that applies migrations/ with the project's
 * one runner (functions/lib/migrate.ts), invoked by a CDK trigger after the database exists
 * and before any function that reads or writes the inbox is created. A failed migration
 * fails the deployment. The SQL files are copied into the bundle, and the bundle's hash
 * covers them, so a new migration file re-runs the trigger on the next deploy.
 */
import { Duration } from 'aws-cdk-lib';
import * as triggers from 'aws-cdk-lib/triggers';
import { Construct } from 'constructs';
import type { ConsumerManifest } from '../../functions/framework/manifest';
import { platformEntry } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';

export interface MigrationsProps {
  platform: FunctionPlatform;
  /** Everything that touches the inbox tables: created after the migrations ran. */
  executeBefore: Construct[];
  /** The stage's operators, whose own database roles the step provisions (functions/inbox/operator-roles.ts). */
  operators: readonly string[];
  /** The declared consumers' data, bundled: their roles and grants are provisioned from it. */
  manifest: ConsumerManifest;
}

export class Migrations extends Construct {
  readonly function: InboxFunction;
  readonly trigger: triggers.Trigger;

  constructor(scope: Construct, id: string, props: MigrationsProps) {
    super(scope, id);
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: platformEntry('migrate', props.manifest),
      description: 'Kafka inbox: apply pending database migrations (deploy time)',
      memorySize: 256,
      timeout: Duration.minutes(10),
      // The one function with the master credentials: it owns the schema and creates the
      // functions' roles. Directly to the cluster, never through the proxy.
      database: { masterSecret: true },
      // Names only: each operator's role is inbox_ops_<name>, with IAM authentication, no password.
      environment: props.operators.length === 0 ? {} : { OPERATORS: props.operators.join(',') },
      commandHooks: {
        beforeBundling: () => [],
        beforeInstall: () => [],
        afterBundling: (inputDir: string, outputDir: string) => [
          `mkdir -p "${outputDir}/migrations"`,
          `cp "${inputDir}"/migrations/*.sql "${outputDir}/migrations/"`,
        ],
      },
    });
    this.trigger = new triggers.Trigger(this, 'Trigger', {
      handler: this.function,
      executeBefore: props.executeBefore,
      executeOnHandlerChange: true,
      timeout: Duration.minutes(10),
    });
  }
}
