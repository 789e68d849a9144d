// Runs one Lambda handler the way the runtime does (import, then handler(event, context))
// and prints its result on a line of its own, `RESULT <json>`. The module is a bundle as it
// ships (the tests), or a handler's source under `node --import tsx` (npm run invoke).
// Exits at once afterwards, as a frozen Lambda would not wait for its idle connections.
//
//   node tools/invoke-handler.mjs <module> <event json> <remaining ms> <request id> [function name]
import { pathToFileURL } from 'node:url';

const [bundle, eventJson, remainingMs, requestId, functionName = 'local'] = process.argv.slice(2);
const started = Date.now();
const context = {
  awsRequestId: requestId,
  functionName,
  invokedFunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${functionName}`,
  getRemainingTimeInMillis: () => Number(remainingMs) - (Date.now() - started),
};
try {
  const { handler } = await import(pathToFileURL(bundle).href);
  const result = await handler(JSON.parse(eventJson), context);
  process.stdout.write(`\nRESULT ${JSON.stringify(result)}\n`);
  process.exit(0);
} catch (error) {
  process.stderr.write(`\nFAILED ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
}
