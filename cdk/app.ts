/**
 * The CDK app: the only infrastructure file that reads context (or env). It validates the
 * stage's configuration, builds its stacks (stateful, platform, consumer stacks) and runs the
 * cdk-nag AwsSolutions checks, so that `cdk synth` fails on an unacknowledged finding just as
 * the tests do, and on a stack over its size budget (stacks/budget.ts). It prints the stage's
 * connection budget (connection-budget.ts); a stage over it is refused by its config.
 *
 *   npx cdk synth                      # the stage named by the "stage" context (cdk.json: dev)
 *   npx cdk deploy --all -c stage=prod # another stage from cdk.json's "stages"
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { CONSUMERS } from '../functions/consumers/index';
import { parseStageConfig, StageConfigError } from './config';
import { connectionBudget, formatConnectionBudget } from './connection-budget';
import { checkStackBudgets } from './stacks/budget';
import { createInboxStacks } from './stacks/index';

const app = new App();
const stage = String(app.node.tryGetContext('stage') ?? 'dev');
const stages = (app.node.tryGetContext('stages') ?? {}) as Record<string, unknown>;
if (!(stage in stages)) {
  throw new StageConfigError(
    `Unknown stage "${stage}": add it under "stages" in cdk.json (known: ${Object.keys(stages).join(', ') || 'none'})`,
  );
}
// Where each consumer was deployed, as committed: a consumer moved by accident is refused.
const placements = (app.node.tryGetContext('consumerStacks') ?? {}) as Record<string, Record<string, string>>;
const config = parseStageConfig(stage, stages[stage], CONSUMERS, placements[stage] ?? {});
// The stage's connections against the writer's limit, at every synth (a stage over it was refused above).
process.stderr.write(`${formatConnectionBudget(stage, connectionBudget(config))}\n`);
createInboxStacks(app, config);
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
checkStackBudgets(app.synth());
