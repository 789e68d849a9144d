/** A Lambda-shaped invocation context for the benchmarks' function processes: a request id and the time left. */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

export function lambdaContext(functionName: string, timeoutMs: number): Context {
  const started = Date.now();
  return {
    awsRequestId: randomUUID(),
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${functionName}`,
    memoryLimitInMB: '512',
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'bench',
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: () => timeoutMs - (Date.now() - started),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}
