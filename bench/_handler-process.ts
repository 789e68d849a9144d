/**
 * One function in its own process, as a Lambda container runs it: the handler module named by
 * its first argument (`functions/<fn>/handler.ts`), configured only by its environment (set
 * by the parent), invoked with a Lambda-shaped context for every event the parent sends.
 * Its standard output and error are the function's log, which the parent reads.
 *
 * Protocol (IPC): the child sends "ready" once the module is loaded; the parent sends
 * `{ event, timeoutMs }` and gets `{ result, ms }` back, or `{ error }`; "exit" ends it.
 */
import { lambdaContext } from './_lambda-context';

const [modulePath] = process.argv.slice(2);
const { handler } = (await import(new URL(`../${modulePath}`, import.meta.url).href)) as {
  handler: (event: unknown, context: unknown) => Promise<unknown>;
};
const name = modulePath!.split('/').at(-2)!;

process.on('message', (message: { event: unknown; timeoutMs: number } | 'exit') => {
  if (message === 'exit') process.exit(0);
  const started = performance.now();
  handler(message.event, lambdaContext(`bench-${name}`, message.timeoutMs)).then(
    (result) => process.send!({ result, ms: performance.now() - started }),
    (error: unknown) => process.send!({ error: error instanceof Error ? error.message : String(error) }),
  );
});
process.send!('ready');
