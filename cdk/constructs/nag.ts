/**
 * cdk-nag acknowledgements. cdk-nag 3 matches each finding exactly (`AwsSolutions-IAM5[Action::s3:*]`),
 * so a rule with several findings on a resource lists each one: nothing is waved through wholesale.
 */
import { Stack, Validations, type CfnElement } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

export interface NagAcknowledgement {
  /** e.g. AwsSolutions-IAM4 */
  id: string;
  /** Why the finding is acceptable here. Required: an acknowledgement without a reason is a defect. */
  reason: string;
  /** The rule's findings this covers (the text inside `[...]`); omitted for rules without findings. */
  findings?: string[];
}

/** Acknowledge findings on a construct and everything under it. */
export function acknowledge(scope: IConstruct, acknowledgements: NagAcknowledgement[]): void {
  for (const a of acknowledgements) {
    if (a.reason.trim().length < 20) throw new Error(`cdk-nag acknowledgement ${a.id} needs a written reason`);
    const ids = a.findings === undefined ? [a.id] : a.findings.map((f) => `${a.id}[${f}]`);
    Validations.of(scope).acknowledge(...ids.map((id) => ({ id, reason: a.reason })));
  }
}

/** The finding text cdk-nag uses for `<resource ARN><suffix>`, e.g. `Resource::<Bucket1234.Arn>/*`. */
export function arnFinding(resource: IConstruct, suffix: string): string {
  const cfn = (resource.node.defaultChild ?? resource) as CfnElement;
  const stack = Stack.of(cfn);
  return `Resource::<${stack.resolve(stack.getLogicalId(cfn)) as string}.Arn>${suffix}`;
}

/**
 * The finding text cdk-nag uses for an ARN built from tokens (pseudo parameters become
 * `<AWS::Region>`, attributes `<Logical.Attr>`), e.g. for a formatArn(...) with a wildcard.
 */
export function resourceFinding(scope: IConstruct, arn: string): string {
  const stack = Stack.of(scope);
  const resolved = stack.resolve(arn) as unknown;
  const render = (part: unknown): string => {
    if (typeof part === 'string') return part;
    const p = part as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
    if (p.Ref !== undefined) return `<${p.Ref}>`;
    if (p['Fn::GetAtt'] !== undefined) return `<${p['Fn::GetAtt'][0]}.${p['Fn::GetAtt'][1]}>`;
    throw new Error(`cannot render ${JSON.stringify(part)} as a cdk-nag finding`);
  };
  const join = (resolved as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  return `Resource::${join === undefined ? render(resolved) : join[1].map(render).join(join[0])}`;
}
