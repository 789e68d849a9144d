/**
 * A simulated Lambda service for the local run: functions registered by name and invoked
 * asynchronously, as AWS invokes the worker for EventBridge Scheduler and for the wake-ups
 * (InvocationType Event). An event waits in the function's queue until its reserved
 * concurrency allows it to start (throttled, as Lambda's asynchronous queue retries a
 * throttle), is dropped once older than the function's maximum event age, and is never
 * retried after a function error (the worker's asynchronous invocation config).
 *
 * The functions' own InvokeCommands reach it through a real LambdaClient whose request
 * handler is this service: the SDK serializes the command as it would for AWS (the path
 * naming the function, the X-Amz-Invocation-Type header, the payload bytes) and this
 * service reads that request and answers 202 — so the local run sends exactly what the
 * functions send in AWS, without a network.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { LambdaClient } from '@aws-sdk/client-lambda';

export interface SimulatedContext {
  awsRequestId: string;
  functionName: string;
  getRemainingTimeInMillis(): number;
}

export interface SimulatedFunction {
  name: string;
  handler: (event: unknown, context: SimulatedContext) => Promise<unknown>;
  /** Invocations running at once, at most. */
  reservedConcurrency: number;
  timeoutMs: number;
  /** Events waiting longer than this are dropped. */
  maxEventAgeMs: number;
  /** While true, queued events wait (the local run's planned crash goes first). */
  holdWhile?: () => boolean;
  /** A function error (the handler threw): logged by the caller, never retried. */
  onError?: (error: unknown) => void;
}

export interface FunctionStats {
  /** Events accepted (Invoke answered 202). */
  accepted: number;
  started: number;
  /** Events that had to wait for a free concurrency slot. */
  throttled: number;
  /** Events dropped for their age. */
  expired: number;
  errors: number;
  peakConcurrency: number;
}

interface Queued {
  payload: unknown;
  acceptedAt: number;
  waited: boolean;
}

interface Registered {
  spec: SimulatedFunction;
  queue: Queued[];
  running: number;
  stats: FunctionStats;
}

const PUMP_MS = 10;

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

export class SimulatedLambda {
  private readonly functions = new Map<string, Registered>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  register(spec: SimulatedFunction): void {
    this.functions.set(spec.name, {
      spec,
      queue: [],
      running: 0,
      stats: { accepted: 0, started: 0, throttled: 0, expired: 0, errors: 0, peakConcurrency: 0 },
    });
  }

  stats(name: string): FunctionStats {
    return { ...this.functions.get(name)!.stats };
  }

  /** An asynchronous invocation, as Invoke with InvocationType Event (or a schedule's target) makes it. */
  invokeAsync(name: string, payload: unknown): boolean {
    const fn = this.functions.get(name);
    if (fn === undefined || this.stopped) return false;
    fn.stats.accepted += 1;
    fn.queue.push({ payload, acceptedAt: performance.now(), waited: false });
    this.pump(fn);
    return true;
  }

  /** A client for the functions: their InvokeCommands arrive here. */
  client(): LambdaClient {
    return new LambdaClient({
      region: 'local',
      // The simulated service checks no signature; the SDK signs with something.
      credentials: { accessKeyId: 'local-simulation', secretAccessKey: 'local-simulation' },
      maxAttempts: 1,
      requestHandler: {
        handle: async (request: { method: string; path: string; headers: Record<string, string>; body?: unknown }) => ({
          response: this.answer(request),
        }),
      },
    });
  }

  /** No new event starts; running invocations see no time left. Resolves when they have returned. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private answer(request: { method: string; path: string; headers: Record<string, string>; body?: unknown }) {
    const reply = (statusCode: number, errorType?: string, message?: string) => ({
      statusCode,
      headers: errorType ? { 'x-amzn-errortype': errorType, 'content-type': 'application/json' } : {},
      body: Readable.from(errorType ? [Buffer.from(JSON.stringify({ Type: 'User', message }))] : []),
    });
    const name = INVOKE_PATH.exec(request.path)?.[1];
    if (request.method !== 'POST' || name === undefined) return reply(400, 'InvalidRequestContentException', 'only Invoke is simulated');
    const type = Object.entries(request.headers).find(([k]) => k.toLowerCase() === 'x-amz-invocation-type')?.[1];
    if (type !== 'Event') return reply(400, 'InvalidRequestContentException', 'only asynchronous invocations are simulated');
    const body = request.body === undefined ? '' : Buffer.from(request.body as Uint8Array | string).toString('utf8');
    let payload: unknown;
    try {
      payload = body === '' ? {} : JSON.parse(body);
    } catch {
      return reply(400, 'InvalidRequestContentException', 'the payload is not JSON');
    }
    const functionName = decodeURIComponent(name);
    if (!this.functions.has(functionName)) return reply(404, 'ResourceNotFoundException', `Function not found: ${functionName}`);
    // Accepted, as Lambda would; once the run is stopping it is simply never started.
    this.invokeAsync(functionName, payload);
    return reply(202);
  }

  /** Start what the function's concurrency allows; look again soon while anything waits. */
  private pump(fn: Registered): void {
    const now = performance.now();
    while (fn.queue.length > 0 && !this.stopped) {
      const next = fn.queue[0]!;
      if (now - next.acceptedAt > fn.spec.maxEventAgeMs) {
        fn.queue.shift();
        fn.stats.expired += 1;
        continue;
      }
      if (fn.spec.holdWhile?.() === true) break;
      if (fn.running >= fn.spec.reservedConcurrency) {
        for (const q of fn.queue) {
          if (!q.waited) fn.stats.throttled += 1;
          q.waited = true;
        }
        break;
      }
      fn.queue.shift();
      this.start(fn, next.payload);
    }
    const waiting = [...this.functions.values()].some((f) => f.queue.length > 0);
    if (waiting && this.timer === undefined && !this.stopped) {
      this.timer = setInterval(() => {
        for (const f of this.functions.values()) this.pump(f);
      }, PUMP_MS);
    } else if (!waiting && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private start(fn: Registered, payload: unknown): void {
    fn.running += 1;
    fn.stats.started += 1;
    fn.stats.peakConcurrency = Math.max(fn.stats.peakConcurrency, fn.running);
    const ends = performance.now() + fn.spec.timeoutMs;
    const context: SimulatedContext = {
      awsRequestId: randomUUID(),
      functionName: fn.spec.name,
      getRemainingTimeInMillis: () => (this.stopped ? 0 : Math.max(0, ends - performance.now())),
    };
    const run: Promise<void> = fn.spec
      .handler(payload, context)
      .then(
        () => undefined,
        (error: unknown) => {
          fn.stats.errors += 1;
          fn.spec.onError?.(error);
        },
      )
      .finally(() => {
        fn.running -= 1;
        this.running.delete(run);
        this.pump(fn);
      });
    this.running.add(run);
  }
}
