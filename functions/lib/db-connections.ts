/**
 * The connections of a function's database client, opened here for postgres.js (its
 * `socket` option) and watched, so that a Lambda container can tell a live connection from
 * one that died while it was frozen (docs/design.md, "Connections").
 *
 * Each connection is a stream between postgres.js and the server that reads the protocol's
 * message frames as they pass (TLS, when asked for, is negotiated here, so the frames are
 * plain): how many statements the server still owes an answer (a Sync or a simple Query is
 * answered by one ReadyForQuery), and when the connection last sent or received anything.
 * From that:
 *
 *   bound      a connection that owes an answer and has heard nothing for `boundMs`, or is
 *              still waiting at the invocation's deadline, is closed: its statement fails as
 *              CONNECTION_CLOSED at once, instead of waiting out the function's timeout on a
 *              peer that is gone. `boundMs` is above the role's statement_timeout, so a slow
 *              statement ends with the server's own 57014 first.
 *   staleness  at an invocation's start, a connection idle longer than the client's idle
 *              timeout (what postgres.js would have closed, had the process not been frozen)
 *              is closed before anything is written to it.
 *   progress   how many messages the server has sent about statements (after a connection's
 *              greeting): work that failed before any came back did nothing the server
 *              answered, and may run again on a new connection (retryOnDeadConnection, db.ts).
 *
 * Nothing here sends a byte of its own: no probe, no keepalive query.
 */
import { once } from 'node:events';
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';

/** How often idle and owing connections are looked at: the precision of the bound and the deadline. */
export const WATCH_EVERY_MS = 100;

/** The protocol's untyped first messages (their code follows the length). */
const PROTOCOL_3 = 196_608;
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

const SYNC = 0x53; // 'S'
const QUERY = 0x51; // 'Q'
const FLUSH = 0x48; // 'H'
const READY_FOR_QUERY = 0x5a; // 'Z'

export interface ConnectionsOptions {
  host: string;
  port: number;
  /** TLS options (the server's certificate and name checks), or false for none. */
  tls: false | Omit<tls.ConnectionOptions, 'socket' | 'host' | 'port'>;
  /** A connection that owes an answer is closed after this long without hearing anything (0: never). */
  boundMs: number;
  now?: () => number;
}

/** The frames of one direction of the protocol: type byte (none for the first, untyped message) and length. */
class Frames {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private first: boolean;

  constructor(firstUntyped: boolean) {
    this.first = firstUntyped;
  }

  /** Calls `onMessage` with each message's type (0 for the untyped first one) and, for that one, its code. */
  read(chunk: Buffer, onMessage: (type: number, code: number) => void): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - at);
        this.remaining -= take;
        at += take;
        continue;
      }
      const headerLength = this.first ? 8 : 5;
      const take = Math.min(headerLength - this.header.length, chunk.length - at);
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
      at += take;
      if (this.header.length < headerLength) return;
      if (this.first) {
        this.first = false;
        this.remaining = this.header.readUInt32BE(0) - 8;
        onMessage(0, this.header.readUInt32BE(4));
      } else {
        this.remaining = this.header.readUInt32BE(1) - 4;
        onMessage(this.header[0]!, 0);
      }
      this.header = Buffer.alloc(0);
    }
  }
}

/** What is known of one connection. */
class Watched {
  /** ReadyForQuery messages the server owes: one for the greeting, one per Sync or Query sent. */
  pendingReady = 0;
  /** A Flush was sent and nothing came back since: the server owes its answer too. */
  flushPending = false;
  greeted = false;
  lastActivity: number;
  readonly outgoing = new Frames(true);
  readonly incoming = new Frames(false);

  constructor(
    readonly stream: WatchedSocket,
    at: number,
  ) {
    this.lastActivity = at;
  }

  owes(): boolean {
    return this.pendingReady > 0 || this.flushPending;
  }
}

/**
 * A connection as postgres.js sees it: a plain duplex stream of the protocol, returned at
 * once (postgres.js attaches its listeners before anything can fail); the TCP connection,
 * and TLS on it, are set up behind it. Failures come as 'error' then 'close', as from a socket.
 */
class WatchedSocket extends Duplex {
  private conn: net.Socket | undefined;
  private readonly pending: { chunk: Buffer; callback: (error?: Error | null) => void }[] = [];
  /** postgres.js names a TLS server from these; kept for its logs. */
  readonly host: string;
  readonly port: number;

  constructor(
    private readonly options: ConnectionsOptions,
    private readonly onData: (chunk: Buffer) => void,
    private readonly onWrite: (chunk: Buffer) => void,
  ) {
    super({ allowHalfOpen: false });
    this.host = options.host;
    this.port = options.port;
    const raw = options.host.startsWith('/')
      ? net.connect({ path: `${options.host}/.s.PGSQL.${options.port}` })
      : net.connect({ host: options.host, port: options.port });
    raw.once('error', (error) => this.destroy(error));
    if (options.tls === false) raw.once('connect', () => this.ready(raw));
    else raw.once('connect', () => this.negotiateTls(raw, options.tls as tls.ConnectionOptions));
  }

  /** Ask the server for TLS (SSLRequest; it answers one byte), then hand the socket to TLS. */
  private negotiateTls(raw: net.Socket, options: tls.ConnectionOptions): void {
    raw.once('data', (answer: Buffer) => {
      if (answer[0] !== 0x53) {
        this.destroy(Object.assign(new Error('the database server does not accept TLS'), { code: 'SSL_NOT_SUPPORTED' }));
        return;
      }
      const secure = tls.connect({ ...options, socket: raw, servername: net.isIP(this.host) ? undefined : this.host });
      secure.once('error', (error) => this.destroy(error));
      secure.once('secureConnect', () => this.ready(secure));
    });
    raw.write(SSL_REQUEST);
  }

  private ready(conn: net.Socket): void {
    if (this.destroyed) {
      conn.destroy();
      return;
    }
    this.conn = conn;
    conn.removeAllListeners('error');
    conn.on('error', (error) => this.destroy(error));
    conn.on('data', (chunk: Buffer) => {
      this.onData(chunk);
      if (!this.push(chunk)) conn.pause();
    });
    conn.on('end', () => this.push(null));
    conn.on('close', () => this.destroy());
    for (const { chunk, callback } of this.pending.splice(0)) conn.write(chunk, callback);
  }

  override _read(): void {
    this.conn?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.onWrite(chunk);
    if (this.conn === undefined) this.pending.push({ chunk, callback });
    else this.conn.write(chunk, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.conn === undefined) callback();
    else this.conn.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.conn?.destroy();
    for (const { callback: written } of this.pending.splice(0)) written(error ?? new Error('connection closed'));
    callback(error);
  }

  /** As a socket's: postgres.js ends a connection politely only while it is open. */
  get readyState(): 'opening' | 'open' | 'closed' {
    if (this.destroyed) return 'closed';
    return this.conn === undefined ? 'opening' : 'open';
  }

  setKeepAlive(enable?: boolean, initialDelay?: number): this {
    this.conn?.setKeepAlive(enable, initialDelay);
    return this;
  }

  /** 'close' says whether an error closed it, as a socket's does (postgres.js backs off reconnecting after one). */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'close' && args.length === 0) return super.emit('close', this.errored !== null);
    return super.emit(event, ...args);
  }
}

export class Connections {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;
  private deadline: number | undefined;
  private readonly now: () => number;
  /** Connections this client closed because they owed an answer too long (tests, logs). */
  unanswered = 0;
  /** Idle connections closed at an invocation's start because they were stale. */
  stale = 0;
  /** Messages the server sent about statements, on every connection this client opened. */
  private answers = 0;

  constructor(readonly options: ConnectionsOptions) {
    this.now = options.now ?? (() => performance.now());
  }

  /** postgres.js's `socket` option: a connection to the server, connecting. */
  readonly open = (): Duplex => {
    let watched: Watched | undefined = undefined;
    const stream = new WatchedSocket(
      this.options,
      (chunk) => this.received(watched!, chunk),
      (chunk) => this.sent(watched!, chunk),
    );
    watched = new Watched(stream, this.now());
    this.watched.add(watched);
    stream.once('close', () => this.watched.delete(watched));
    this.timer ??= setInterval(() => this.watch(), WATCH_EVERY_MS).unref();
    return stream;
  };

  private sent(w: Watched, chunk: Buffer): void {
    w.lastActivity = this.now();
    w.outgoing.read(chunk, (type, code) => {
      if (type === 0) w.pendingReady += code === PROTOCOL_3 ? 1 : 0;
      else if (type === SYNC || type === QUERY) w.pendingReady += 1;
      else if (type === FLUSH) w.flushPending = true;
    });
  }

  private received(w: Watched, chunk: Buffer): void {
    w.lastActivity = this.now();
    w.flushPending = false;
    w.incoming.read(chunk, (type) => {
      if (w.greeted) this.answers += 1;
      if (type === READY_FOR_QUERY) {
        w.pendingReady = Math.max(0, w.pendingReady - 1);
        w.greeted = true;
      }
    });
  }

  /**
   * An invocation begins: statements still owing an answer `untilDeadlineMs` from now are cut
   * off, and connections idle longer than `staleAfterMs` are closed now.
   */
  async beginInvocation(untilDeadlineMs: number, staleAfterMs: number): Promise<void> {
    const now = this.now();
    this.deadline = now + untilDeadlineMs;
    const stale = [...this.watched].filter((w) => !w.owes() && now - w.lastActivity > staleAfterMs);
    this.stale += stale.length;
    await this.closeAll(stale);
  }

  /** Close every connection that owes nothing: after a connection died, the others of the same freeze are suspect too. */
  async closeIdle(): Promise<void> {
    await this.closeAll([...this.watched].filter((w) => !w.owes()));
  }

  /**
   * Close them, and resolve once postgres.js has seen each close (its listener runs before
   * ours): a statement sent after this goes to a new connection, not to a closing one.
   */
  private async closeAll(ws: readonly Watched[]): Promise<void> {
    const closed = ws.map((w) => once(w.stream, 'close'));
    for (const w of ws) this.close(w);
    await Promise.all(closed);
  }

  /** The server's answers so far, on any connection: a reading to hold against a later one. */
  progress(): number {
    return this.answers;
  }

  /** The open connections. */
  get size(): number {
    return this.watched.size;
  }

  private watch(): void {
    const now = this.now();
    const bound = this.options.boundMs > 0 ? this.options.boundMs : Number.POSITIVE_INFINITY;
    for (const w of this.watched) {
      if (w.owes() && (now - w.lastActivity >= bound || (this.deadline !== undefined && now >= this.deadline))) {
        this.unanswered += 1;
        this.close(w);
      }
    }
    if (this.watched.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** postgres.js sees the stream close and fails what was waiting on it as CONNECTION_CLOSED. */
  private close(w: Watched): void {
    this.watched.delete(w);
    w.stream.destroy();
  }
}
