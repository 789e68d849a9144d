/**
 * A small TCP proxy in front of the test server that behaves as RDS Proxy does with a
 * PostgreSQL startup message: it accepts user, database and application_name and refuses a
 * connection that asks for any other parameter (a session setting such as statement_timeout,
 * client_encoding, or `options`), with a FATAL 0A000 (feature_not_supported). What it
 * accepts it passes through to the server byte for byte.
 *
 * It can also play dead: `blackHole()` keeps the connections open through it but swallows
 * whatever either side sends from then on, with no FIN or RST: what a client thawed after a
 * long freeze meets when the path to its server is gone (an idle timeout, a failover).
 */
import net from 'node:net';

export const ACCEPTED_STARTUP_PARAMETERS = ['user', 'database', 'application_name'] as const;

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;

export interface StartupProxy {
  port: number;
  /** The URL of `url`'s server, through this proxy. */
  urlThrough(url: string): string;
  /** The startup parameters of every connection it accepted, in order. */
  accepted: Record<string, string>[];
  /** The parameters of every connection it refused. */
  refused: Record<string, string>[];
  /** From now on, swallow everything on the connections open through it (they stay open). */
  blackHole(): void;
  /** Connections that closed from the client's side. */
  closedByClient: number;
  close(): Promise<void>;
}

function parameters(body: Buffer): Record<string, string> {
  const parts = body.toString('utf8').split('\0');
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < parts.length && parts[i] !== ''; i += 2) out[parts[i]!] = parts[i + 1]!;
  return out;
}

function fatal(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`, 'utf8');
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeUInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/** Reads length-prefixed, untyped messages (the startup phase) from a socket, one at a time. */
function untypedMessages(socket: net.Socket, onMessage: (message: Buffer) => boolean): void {
  let pending = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUInt32BE(0);
      if (pending.length < length) return;
      const message = pending.subarray(0, length);
      pending = pending.subarray(length);
      if (!onMessage(message)) {
        socket.removeListener('data', onData);
        // Whatever followed the startup message belongs to the server.
        if (pending.length > 0) socket.unshift(pending);
        return;
      }
    }
  };
  socket.on('data', onData);
}

export async function startStartupProxy(target: { host: string; port: number }): Promise<StartupProxy> {
  const accepted: Record<string, string>[] = [];
  const refused: Record<string, string>[] = [];
  const pairs: { client: net.Socket; server: net.Socket; dead: boolean }[] = [];
  const state = { closedByClient: 0 };

  const server = net.createServer((client) => {
    client.on('error', () => {});
    untypedMessages(client, (message) => {
      const code = message.readUInt32BE(4);
      if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
        // No TLS here: the client goes on in plain text (or gives up, as it chooses).
        client.write('N');
        return true;
      }
      const params = code === PROTOCOL_3 ? parameters(message.subarray(8)) : {};
      const unsupported = Object.keys(params).filter((k) => !(ACCEPTED_STARTUP_PARAMETERS as readonly string[]).includes(k));
      if (code === PROTOCOL_3 && unsupported.length > 0) {
        refused.push(params);
        client.end(fatal('0A000', `this proxy does not support the startup parameter ${unsupported.join(', ')}`));
        return false;
      }
      if (code === PROTOCOL_3) accepted.push(params);
      else if (code !== CANCEL_REQUEST) {
        client.end(fatal('08P01', `unsupported startup request ${code}`));
        return false;
      }
      const upstream = net.connect(target);
      upstream.on('error', () => client.destroy());
      const pair = { client, server: upstream, dead: false };
      pairs.push(pair);
      upstream.write(message);
      client.pause();
      setImmediate(() => {
        client.on('data', (chunk: Buffer) => pair.dead || upstream.write(chunk));
        upstream.on('data', (chunk: Buffer) => pair.dead || client.write(chunk));
        client.resume();
      });
      client.on('end', () => {
        state.closedByClient += 1;
        upstream.end();
      });
      client.on('close', () => upstream.destroy());
      upstream.on('end', () => pair.dead || client.end());
      return false;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    urlThrough(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    accepted,
    refused,
    blackHole() {
      for (const p of pairs) p.dead = true;
    },
    get closedByClient() {
      return state.closedByClient;
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.server.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
