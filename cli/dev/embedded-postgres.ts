import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import type { Logger } from '../../lib/logger.ts';

// Why not @electric-sql/pglite-socket's PGLiteSocketServer: PGlite is ONE backend, and that server interleaves
// its connections message by message. Prepared statement names are per backend, so the IdP's named statements
// collide as soon as a pool opens a second connection ("prepared statement already exists"), and one
// connection's unnamed Parse can be replaced by another's before its Bind. This server gives each connection
// the backend for a whole request cycle (until ReadyForQuery says idle, so a transaction is never shared)
// and gives each connection its own namespace of statement names.

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;

export interface EmbeddedPostgres {
  /** A `postgresql://` URL for node-postgres (or psql) on the wire-protocol listener. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** PGlite's data directory (created when missing); its contents survive restarts. */
  dataDir: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  log: Logger;
}

export class DataDirInUseError extends Error {
  constructor(dir: string, pid: number) {
    super(
      `${dir} is in use by another process (pid ${pid}); stop it or point PLATFORM_DEV_DATA_DIR elsewhere`,
    );
    this.name = 'DataDirInUseError';
  }
}

/** PGlite on a data directory, served over the PostgreSQL wire protocol on a local port. */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
  const releaseDir = await lockDataDir(opts.dataDir);
  let db: PGlite;
  try {
    db = await PGlite.create({ dataDir: opts.dataDir });
  } catch (err) {
    await releaseDir();
    throw err;
  }
  const params = await serverParameters(db);
  const turns = new Turns();
  const sessions = new Set<Session>();
  let nextId = 1;
  const server = createServer((socket) => {
    const session = new Session(nextId++, socket, db, turns, params, opts.log);
    sessions.add(session);
    socket.once('close', () => {
      void session.cleanUp().finally(() => sessions.delete(session));
    });
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  }).catch(async (err: unknown) => {
    await db.close();
    await releaseDir();
    throw err;
  });
  opts.log.info({ port, dataDir: opts.dataDir }, 'embedded postgres (PGlite) listening');
  return {
    port,
    url: `postgresql://postgres@${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}/postgres`,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sessions) s.destroy();
      await Promise.all([...sessions].map((s) => s.cleanUp()));
      await closed;
      await db.close();
      await releaseDir();
    },
  };
}

/**
 * PGlite does not stop a second process from opening the same directory, and two writers corrupt it. A pid
 * file next to it is taken over only when that process is gone.
 */
async function lockDataDir(dir: string): Promise<() => Promise<void>> {
  const file = `${dir}/.platform-dev.pid`;
  const held = await readFile(file, 'utf8').then(
    (t) => Number.parseInt(t, 10),
    () => undefined,
  );
  if (held && held !== process.pid && isAlive(held)) throw new DataDirInUseError(dir, held);
  await writeFile(file, String(process.pid), { mode: 0o600 });
  return () => rm(file, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function serverParameters(db: PGlite): Promise<Array<[string, string]>> {
  const { rows } = await db.query<{ v: string; tz: string }>(
    "SELECT current_setting('server_version') AS v, current_setting('TimeZone') AS tz",
  );
  return [
    ['server_version', rows[0]?.v ?? '17'],
    ['server_encoding', 'UTF8'],
    ['client_encoding', 'UTF8'],
    ['DateStyle', 'ISO, MDY'],
    ['integer_datetimes', 'on'],
    ['standard_conforming_strings', 'on'],
    ['TimeZone', rows[0]?.tz ?? 'UTC'],
  ];
}

/** Who has the one backend: a connection keeps it from its first message until the backend is idle again. */
class Turns {
  #owner: number | undefined;
  readonly #waiting: Array<{ id: number; resolve: () => void }> = [];

  async acquire(id: number): Promise<void> {
    if (this.#owner === id) return;
    if (this.#owner === undefined) {
      this.#owner = id;
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push({ id, resolve }));
  }

  release(id: number): void {
    if (this.#owner !== id) return;
    const next = this.#waiting.shift();
    this.#owner = next?.id;
    next?.resolve();
  }

  /** Drops a connection that went away while waiting for its turn. */
  forget(id: number): void {
    const i = this.#waiting.findIndex((w) => w.id === id);
    if (i >= 0) this.#waiting.splice(i, 1);
    this.release(id);
  }
}

class Session {
  readonly #id: number;
  readonly #socket: Socket;
  readonly #db: PGlite;
  readonly #turns: Turns;
  readonly #params: Array<[string, string]>;
  readonly #log: Logger;
  /** Statement names this connection created, as the backend knows them (prefixed). */
  readonly #statements = new Set<string>();
  #buffer: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  #started = false;
  #holding = false;
  /** Messages of one connection are handled strictly in order. */
  #chain: Promise<void> = Promise.resolve();
  #cleanUp: Promise<void> | undefined;

  constructor(
    id: number,
    socket: Socket,
    db: PGlite,
    turns: Turns,
    params: Array<[string, string]>,
    log: Logger,
  ) {
    this.#id = id;
    this.#socket = socket;
    this.#db = db;
    this.#turns = turns;
    this.#params = params;
    this.#log = log;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#receive(chunk));
    socket.on('error', () => {}); // a client that vanished: 'close' follows and cleans up
  }

  destroy(): void {
    this.#socket.destroy();
  }

  #receive(chunk: Buffer): void {
    this.#buffer = this.#buffer.length ? Buffer.concat([this.#buffer, chunk]) : chunk;
    for (;;) {
      const headerLength = this.#started ? 5 : 4;
      if (this.#buffer.length < headerLength) return;
      const length = this.#started ? this.#buffer.readInt32BE(1) + 1 : this.#buffer.readInt32BE(0);
      // Shorter than its own header (5 typed, 8 at start-up) or absurdly long: not a PostgreSQL client.
      if (length < (this.#started ? 5 : 8) || length > 64 * 1024 * 1024) {
        this.destroy();
        return;
      }
      if (this.#buffer.length < length) return;
      const message = this.#buffer.subarray(0, length);
      this.#buffer = this.#buffer.subarray(length);
      const started = this.#started;
      if (!started && message.readInt32BE(4) === PROTOCOL_3) this.#started = true;
      this.#chain = this.#chain
        .then(() => (started ? this.#message(message) : this.#startup(message)))
        .catch((err: unknown) => {
          this.#log.error({ err, connection: this.#id }, 'embedded postgres: connection failed');
          this.destroy();
        });
    }
  }

  async #startup(message: Buffer): Promise<void> {
    const code = message.readInt32BE(4);
    if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
      this.#socket.write('N'); // no encryption on a loopback development server; the client goes on in clear
      return;
    }
    if (code === CANCEL_REQUEST) {
      this.#socket.end();
      return;
    }
    if (code !== PROTOCOL_3) {
      this.#socket.end(errorResponse('08P01', 'unsupported frontend protocol'));
      return;
    }
    const parts = [backendMessage('R', int32(0))];
    for (const [k, v] of this.#params) parts.push(backendMessage('S', Buffer.from(`${k}\0${v}\0`)));
    parts.push(backendMessage('K', Buffer.concat([int32(this.#id), int32(0)])));
    parts.push(backendMessage('Z', Buffer.from('I')));
    this.#socket.write(Buffer.concat(parts));
  }

  async #message(message: Buffer): Promise<void> {
    if (message[0] === 0x58 /* X: Terminate */) {
      this.#socket.end();
      return;
    }
    const out = await this.#run(this.#rename(message));
    if (this.#socket.writable && out.length) this.#socket.write(out);
  }

  /** Runs one frontend message with the backend held; lets go when the backend reports idle. */
  async #run(message: Buffer): Promise<Uint8Array> {
    await this.#turns.acquire(this.#id);
    this.#holding = true;
    let out: Uint8Array;
    try {
      out = await this.#db.execProtocolRaw(message);
    } catch (err) {
      this.#holding = false;
      this.#turns.release(this.#id);
      throw err;
    }
    if (readyStatus(out) === 'I') {
      this.#holding = false;
      this.#turns.release(this.#id);
    }
    return out;
  }

  /** Parse, Bind, Describe and Close name statements; each connection gets its own prefix. */
  #rename(message: Buffer): Buffer {
    const type = String.fromCharCode(message[0]!);
    const prefix = `c${this.#id}_`;
    if (type === 'P') {
      const [name, end] = cstring(message, 5);
      if (!name) return message;
      this.#statements.add(prefix + name);
      return withBody('P', [Buffer.from(`${prefix}${name}\0`), message.subarray(end)]);
    }
    if (type === 'B') {
      const [portal, afterPortal] = cstring(message, 5);
      const [name, end] = cstring(message, afterPortal);
      if (!name) return message;
      return withBody('B', [Buffer.from(`${portal}\0${prefix}${name}\0`), message.subarray(end)]);
    }
    if ((type === 'D' || type === 'C') && message[5] === 0x53 /* S: a statement, not a portal */) {
      const [name, end] = cstring(message, 6);
      if (!name) return message;
      if (type === 'C') this.#statements.delete(prefix + name);
      return withBody(type, [Buffer.from(`S${prefix}${name}\0`), message.subarray(end)]);
    }
    return message;
  }

  /**
   * When the connection goes: end whatever it left open on the shared backend (an unfinished extended-query
   * cycle, a transaction) and drop its statements, so the next connection starts clean.
   */
  cleanUp(): Promise<void> {
    this.#cleanUp ??= this.#chain.then(async () => {
      if (!this.#holding && this.#statements.size === 0) {
        this.#turns.forget(this.#id);
        return;
      }
      try {
        await this.#turns.acquire(this.#id);
        if (this.#holding) {
          const status = readyStatus(await this.#db.execProtocolRaw(backendMessage('S', Buffer.alloc(0))));
          if (status !== 'I') await this.#db.execProtocolRaw(query('ROLLBACK'));
        }
        for (const name of this.#statements) {
          await this.#db.execProtocolRaw(query(`DEALLOCATE "${name.replace(/"/g, '""')}"`));
        }
      } catch (err) {
        this.#log.warn({ err, connection: this.#id }, 'embedded postgres: clean-up after disconnect failed');
      } finally {
        this.#statements.clear();
        this.#holding = false;
        this.#turns.forget(this.#id);
      }
    });
    return this.#cleanUp;
  }
}

/** The transaction status of the last ReadyForQuery in a backend answer, if there is one. */
function readyStatus(out: Uint8Array): string | undefined {
  const buf = Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  let status: string | undefined;
  let i = 0;
  while (i + 5 <= buf.length) {
    const length = buf.readInt32BE(i + 1);
    if (buf[i] === 0x5a /* Z */ && i + 5 < buf.length) status = String.fromCharCode(buf[i + 5]!);
    i += 1 + length;
  }
  return status;
}

function cstring(buf: Buffer, start: number): [string, number] {
  const end = buf.indexOf(0, start);
  if (end < 0) return ['', buf.length];
  return [buf.toString('utf8', start, end), end + 1];
}

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

function withBody(type: string, parts: Buffer[]): Buffer {
  return backendMessage(type, Buffer.concat(parts));
}

/** type byte + length (including itself) + body: the shape of every message after start-up, both ways. */
function backendMessage(type: string, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(type), int32(body.length + 4), body]);
}

function query(sql: string): Buffer {
  return backendMessage('Q', Buffer.from(`${sql}\0`));
}

function errorResponse(code: string, message: string): Buffer {
  return backendMessage('E', Buffer.from(`SFATAL\0C${code}\0M${message}\0\0`));
}
