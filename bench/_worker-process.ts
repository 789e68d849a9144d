/**
 * One worker function in its own process, as a Lambda container runs it: the module
 * `functions/worker/handler.ts` configured only by its environment (set by the parent),
 * invoked with a Lambda-shaped context until an invocation finds nothing to claim.
 *
 * Protocol (IPC): the child sends "ready" once the handler module is loaded; the parent
 * sends "go" to every child at once; each child answers with its totals and exits.
 */
import { lambdaContext } from './_lambda-context';

const INVOCATION_MS = 15 * 60 * 1000;
const context = () => lambdaContext('bench-worker', INVOCATION_MS);

const { getConsumer } = await import('../functions/consumers');
const { workerLambda } = await import('../functions/worker/handler');
const handler = await workerLambda(getConsumer(process.env.CONSUMER_NAME ?? ''));
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
