/**
 * One worker function in its own process, as a Lambda container runs it: the module
 * `functions/worker/handler.ts` configured only by its environment (set by the parent),
 * invoked with a Lambda-shaped context until an invocation finds nothing to claim.
 *
 * Protocol (IPC): the child sends "ready" once the handler module is loaded; the parent
 * sends "go" to every child at once; each child answers with its totals and exits.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

const INVOCATION_MS = 15 * 60 * 1000;

function context(): Context {
  const started = Date.now();
  return {
    awsRequestId: randomUUID(),
    functionName: 'bench-worker',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:bench-worker',
    memoryLimitInMB: '1024',
    logGroupName: '/aws/lambda/bench-worker',
    logStreamName: 'bench',
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: () => INVOCATION_MS - (Date.now() - started),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

const { handler } = await import('../functions/worker/handler');
process.send!('ready');
async function drain() {
  const totals = { claimed: 0, processed: 0, invocations: 0 };
  for (;;) {
    const result = await handler({}, context());
    totals.invocations += 1;
    totals.claimed += result.claimed;
    totals.processed += result.processed;
    if (result.claimed === 0) return totals;
  }
}

// A drain that fails ends the process with status 1, which the benchmark reports, rather
// than leaving a rejected promise nobody awaits.
process.on('message', (message) => {
  if (message !== 'go') return;
  drain().then(
    (totals) => process.send!(totals, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
