/**
 * The stage's operators' database access (docs/ops.md, "Who did it"): each may connect, with
 * IAM authentication as the functions do, as their own role `inbox_ops_<name>` (a member of
 * inbox_ops, provisioned by the migration step), on the endpoint the functions use, and as
 * nothing else. The statement goes on the principal the stage declares for them: an IAM
 * role or user of the stage's account.
 */
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { operatorRole } from '../../functions/lib/database-roles';
import type { StageConfig } from '../config';
import { grantConnect, type DatabaseConnection } from '../stacks/stage-references';

export interface OperatorAccessProps {
  operators: StageConfig['operators'];
  connection: DatabaseConnection;
}

export class OperatorAccess extends Construct {
  constructor(scope: Construct, id: string, props: OperatorAccessProps) {
    super(scope, id);
    for (const operator of props.operators) {
      const principal = /:role\//.test(operator.principalArn)
        ? iam.Role.fromRoleArn(this, `${operator.name}Role`, operator.principalArn, { mutable: true })
        : iam.User.fromUserArn(this, `${operator.name}User`, operator.principalArn);
      grantConnect(principal, props.connection, operatorRole(operator.name));
    }
  }
}
