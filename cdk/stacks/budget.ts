/**
 * CloudFormation refuses a template with more than 500 resources or over 1 MB (the size of
 * the template as CDK writes it and uploads it). A stack near either limit fails its deploy
 * after every stack before it has deployed, so synth checks each template against a budget
 * below the limits: a stack that grows past it fails synth, naming the stack and what to do,
 * while there is still room to deploy a fix.
 */
import { statSync } from 'node:fs';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';

export const CLOUDFORMATION_LIMITS = { resources: 500, templateBytes: 1_000_000 } as const;

/** The share of each limit a stack may use: 20 % stays free for what a fix or a CDK upgrade adds. */
export const BUDGET_SHARE = 0.8;

export const STACK_BUDGET = {
  resources: Math.floor(CLOUDFORMATION_LIMITS.resources * BUDGET_SHARE),
  templateBytes: Math.floor(CLOUDFORMATION_LIMITS.templateBytes * BUDGET_SHARE),
} as const;

export interface StackSize {
  stackName: string;
  resources: number;
  /** The template file's size, as written and uploaded. */
  templateBytes: number;
}

export class StackBudgetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StackBudgetError';
  }
}

/** Every stack's resource count and template size in a synthesized assembly. */
export function stackSizes(assembly: CloudAssembly): StackSize[] {
  return assembly.stacksRecursively.map((stack) => ({
    stackName: stack.stackName,
    resources: Object.keys((stack.template as { Resources?: object }).Resources ?? {}).length,
    templateBytes: statSync(stack.templateFullPath).size,
  }));
}

/** Throws StackBudgetError listing every stack over its budget (tests may pass a tighter one). */
export function checkStackBudgets(
  assembly: CloudAssembly,
  budget: { resources: number; templateBytes: number } = STACK_BUDGET,
): StackSize[] {
  const sizes = stackSizes(assembly);
  const over = sizes.flatMap((s) => {
    const problems: string[] = [];
    if (s.resources > budget.resources)
      problems.push(`${s.resources} resources (budget ${budget.resources}, CloudFormation's limit ${CLOUDFORMATION_LIMITS.resources})`);
    if (s.templateBytes > budget.templateBytes)
      problems.push(
        `a ${s.templateBytes}-byte template (budget ${budget.templateBytes}, CloudFormation's limit ${CLOUDFORMATION_LIMITS.templateBytes})`,
      );
    return problems.length === 0 ? [] : [`${s.stackName}: ${problems.join(' and ')}`];
  });
  if (over.length > 0) {
    throw new StackBudgetError(
      `Stacks over their budget (${budget.resources} resources, ${budget.templateBytes} bytes: ${Math.round(BUDGET_SHARE * 100)} % of CloudFormation's limits by default):\n  ${over.join('\n  ')}\n` +
        'A consumer stack: move the consumers added last to another stack (their declaration\'s or the stage\'s "stack", docs/stacks.md), or lower stages.<stage>.maxConsumersPerStack. ' +
        'The platform or stateful stack: find what grew there with `cdk synth` and the template, and split it off.',
    );
  }
  return sizes;
}
