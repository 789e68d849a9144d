/**
 * The local run's simulated Lambda service: the functions' real InvokeCommands (through
 * the LambdaClient it hands out) start the registered handler with their payload, within
 * the function's reserved concurrency; what Lambda would refuse or drop, it refuses or drops.
 */
import { InvokeCommand } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { SimulatedLambda, type SimulatedContext } from '../../../tools/local/lambda';

const invoke = (name: string, payload: unknown, type: 'Event' | 'RequestResponse' = 'Event') =>
  new InvokeCommand({ FunctionName: name, InvocationType: type, Payload: Buffer.from(JSON.stringify(payload)) });

/** A handler that records its events and waits until released. */
function gated() {
  const events: unknown[] = [];
  const contexts: SimulatedContext[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return {
    events,
    contexts,
    release: () => open(),
    handler: async (event: unknown, context: SimulatedContext) => {
      events.push(event);
      contexts.push(context);
      await gate;
    },
  };
}

describe('SimulatedLambda', () => {
  it('answers an asynchronous Invoke with 202 and runs the handler with its payload and a context', async () => {
    const lambda = new SimulatedLambda();
    const fn = gated();
    lambda.register({ name: 'worker-a', handler: fn.handler, reservedConcurrency: 2, timeoutMs: 30_000, maxEventAgeMs: 60_000 });

    const answer = await lambda.client().send(invoke('worker-a', { source: 'wake-up', slot: 1 }));
    fn.release();
    await lambda.stop();

    expect(answer.StatusCode).toBe(202);
    expect(fn.events).toEqual([{ source: 'wake-up', slot: 1 }]);
    expect(fn.contexts[0]).toMatchObject({ functionName: 'worker-a', awsRequestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(lambda.stats('worker-a')).toMatchObject({ accepted: 1, started: 1, errors: 0 });
  });

  it('starts no more than the reserved concurrency; the rest wait their turn', async () => {
    const lambda = new SimulatedLambda();
    const fn = gated();
    lambda.register({ name: 'w', handler: fn.handler, reservedConcurrency: 2, timeoutMs: 30_000, maxEventAgeMs: 60_000 });
    const client = lambda.client();

    for (let i = 0; i < 5; i++) await client.send(invoke('w', { n: i }));
    const startedBeforeRelease = fn.events.length;
    fn.release();
    await new Promise((r) => setTimeout(r, 100));
    await lambda.stop();

    expect(startedBeforeRelease).toBe(2);
    expect(fn.events).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
    expect(lambda.stats('w')).toMatchObject({ accepted: 5, started: 5, throttled: 3, peakConcurrency: 2 });
  });

  it('drops an event that waited longer than the maximum event age', async () => {
    const lambda = new SimulatedLambda();
    let hold = true;
    const fn = gated();
    fn.release();
    lambda.register({ name: 'w', handler: fn.handler, reservedConcurrency: 1, timeoutMs: 1_000, maxEventAgeMs: 30, holdWhile: () => hold });

    lambda.invokeAsync('w', { n: 1 });
    await new Promise((r) => setTimeout(r, 80));
    hold = false;
    lambda.invokeAsync('w', { n: 2 });
    await new Promise((r) => setTimeout(r, 30));
    await lambda.stop();

    expect(fn.events).toEqual([{ n: 2 }]);
    expect(lambda.stats('w')).toMatchObject({ accepted: 2, started: 1, expired: 1 });
  });

  it('refuses an unknown function as Lambda does (ResourceNotFoundException), and a synchronous invocation', async () => {
    const lambda = new SimulatedLambda();
    lambda.register({ name: 'w', handler: async () => {}, reservedConcurrency: 1, timeoutMs: 1_000, maxEventAgeMs: 1_000 });
    const client = lambda.client();

    await expect(client.send(invoke('nobody', {}))).rejects.toMatchObject({
      name: 'ResourceNotFoundException',
      $metadata: { httpStatusCode: 404 },
    });
    await expect(client.send(invoke('w', {}, 'RequestResponse'))).rejects.toMatchObject({ name: 'InvalidRequestContentException' });
    expect(lambda.stats('w').accepted).toBe(0);
    await lambda.stop();
  });

  it('gives running invocations no time left once stopped, and accepts nothing after', async () => {
    const lambda = new SimulatedLambda();
    const fn = gated();
    lambda.register({ name: 'w', handler: fn.handler, reservedConcurrency: 1, timeoutMs: 60_000, maxEventAgeMs: 60_000 });
    lambda.invokeAsync('w', {});
    await new Promise((r) => setTimeout(r, 10));

    const stopping = lambda.stop();
    const left = fn.contexts[0]!.getRemainingTimeInMillis();
    fn.release();
    await stopping;

    expect(left).toBe(0);
    expect(lambda.invokeAsync('w', {})).toBe(false);
  });
});
