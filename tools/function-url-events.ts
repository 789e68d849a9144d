/**
 * The event a Lambda function URL with AWS_IAM auth gives its function: an HTTP request
 * whose request context carries the signed caller's IAM identity. For the tests of the ops
 * function (functions/ops/function-url.ts), as the bundle and as its handler.
 *
 *   functionUrlRequest({ command: 'replay', ids: [id], reason: 'fixed', apply: true }, OPERATOR_SESSION)
 */
import type { LambdaFunctionURLEventWithIAMAuthorizer } from 'aws-lambda';

/** An operator's role, as a stage declares it, and a session assumed from it, as Lambda reports the caller. */
export const OPERATOR_ROLE = 'arn:aws:iam::123456789012:role/ops/InboxOperatorAlice';
export const OPERATOR_SESSION = 'arn:aws:sts::123456789012:assumed-role/InboxOperatorAlice/alice@example.com';

export function functionUrlRequest(
  body: unknown,
  /** null: a request context without an IAM identity (what an AWS_IAM URL never sends). */
  callerArn: string | null,
  { method = 'POST' }: { method?: string } = {},
): LambdaFunctionURLEventWithIAMAuthorizer {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/',
    rawQueryString: '',
    headers: { 'content-type': 'application/json', host: 'abcdefgh.lambda-url.eu-west-1.on.aws' },
    isBase64Encoded: true,
    body: Buffer.from(text, 'utf8').toString('base64'),
    requestContext: {
      accountId: '123456789012',
      apiId: 'abcdefgh',
      domainName: 'abcdefgh.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'abcdefgh',
      http: { method, path: '/', protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'test' },
      requestId: 'req-url',
      routeKey: '$default',
      stage: '$default',
      time: '03/Jul/2026:09:15:30 +0000',
      timeEpoch: 1_783_070_130_000,
      authorizer: {
        iam: {
          accessKey: 'ASIAEXAMPLE',
          accountId: '123456789012',
          callerId: 'AROAEXAMPLE:alice@example.com',
          cognitoIdentity: null,
          principalOrgId: null,
          userArn: callerArn ?? undefined,
          userId: 'AROAEXAMPLE:alice@example.com',
        },
      },
    },
  } as unknown as LambdaFunctionURLEventWithIAMAuthorizer;
}
