import pino, { type Logger } from 'pino';

export type { Logger };

// Secrets never reach a log line: credentials travel in these headers and bodies, and the
// authorization response's Location carries the code.
/** Members that hold a credential wherever they appear. */
const SECRET_NAMES = [
  'access_token',
  'refresh_token',
  'id_token',
  'code_verifier',
  'client_secret',
  'token',
  'password',
  // RFC 8693: the platform token a gateway exchanges for a user's upstream token.
  'subject_token',
];
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  // The user's token for a system behind a tool server (signature v4, lib/identity.ts).
  'req.headers["x-platform-upstream-token"]',
  'res.headers["set-cookie"]',
  'res.headers.location',
  ...SECRET_NAMES.map((n) => `*.${n}`),
  '*.code',
];

/**
 * The members looked for at any depth of a logged error. The paths above reach one level down (`err.token`);
 * an error carries what its library put in it (`err.detail.token`, a request's `headers`, a command's
 * arguments), at any depth, and is logged whole only on the unexpected paths. Error lines are rare, so walking
 * them costs nothing on the hot paths. `code` is left out: inside an error it is an error code (`ECONNRESET`).
 */
const SECRET_MEMBERS = new Set([
  ...SECRET_NAMES,
  'authorization',
  'cookie',
  'set-cookie',
  'x-platform-upstream-token',
]);
const MAX_ERROR_DEPTH = 8;

function scrub(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (ArrayBuffer.isView(value) || value instanceof Date) return value;
  // `seen` holds the path from the root: an object met twice side by side is written twice, a cycle is cut.
  if (seen.has(value)) return '[circular]';
  if (depth >= MAX_ERROR_DEPTH) return '[too deep]';
  seen.add(value);
  try {
    if (value instanceof Error) return scrub(pino.stdSerializers.err(value), depth, seen);
    if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1, seen));
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      out[key] = SECRET_MEMBERS.has(key.toLowerCase())
        ? '[redacted]'
        : scrub((value as Record<string, unknown>)[key], depth + 1, seen);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

/** pino's error serializer, then every secret-named member at any depth replaced (see SECRET_MEMBERS). */
export function serializeError(err: unknown): unknown {
  return scrub(err instanceof Error ? pino.stdSerializers.err(err) : err, 0, new WeakSet());
}

let timeMs = Number.NaN;
let timeField = '';

/**
 * pino's `isoTime` (the same `,"time":"…"` field), formatted once per millisecond: a server writing two lines
 * per request formats the same millisecond again and again (`toISOString` was ~2.5 % of a tool call's CPU).
 */
export function isoTime(): string {
  const now = Date.now();
  if (now !== timeMs) {
    timeMs = now;
    timeField = `,"time":"${new Date(now).toISOString()}"`;
  }
  return timeField;
}

export interface LoggerOptions {
  name: string;
  level?: string;
  destination?: pino.DestinationStream;
  /**
   * Lines handed to the output in batches (BatchedOutput): for a server writing a line or two per request, where
   * each write to a pipe costs more than the line itself. Default false: each line is handed on as written.
   */
  batched?: boolean;
}

export function createLogger({ name, level = 'info', destination, batched = false }: LoggerOptions): Logger {
  const opts: pino.LoggerOptions = {
    name,
    level,
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: { err: serializeError },
    // `name` says which process wrote the line; `service`, where a line has one, is the MCP service it concerns.
    base: { pid: process.pid },
    timestamp: isoTime,
  };
  if (batched)
    return pino(opts, new BatchedOutput(destination ?? pino.destination({ dest: 1, sync: false })));
  return destination ? pino(opts, destination) : pino(opts);
}

/** Characters a BatchedOutput holds at most before handing them on. */
export const BATCH_CHARS = 16 * 1024;
/** How long a line waits in a BatchedOutput at most: the delay an operator may see on a quiet server. */
export const BATCH_MS = 20;

/**
 * A server's lines, handed to the real output (pino's asynchronous stdout, which keeps the EPIPE and exit
 * handling it had) in one string per BATCH_CHARS or per BATCH_MS, whichever comes first. A tool server writes
 * two lines a call, each once an fs.write through libuv's thread pool to a pipe, whose wake-ups cost more than
 * the line (docs/performance.md § The tool path: ~13 % of a call's CPU); batched, a busy server writes a few
 * times per 100 calls. The lines still come out whole and in order; on exit (process.exit, the end of the event
 * loop, an uncaught exception) the held lines are handed on first, and pino's own exit flush writes them. A
 * process killed outright loses at most BATCH_MS of lines (the asynchronous output could always lose the write
 * in flight). Not sonic-boom's own `minLength` (pino.destination): it holds lines until that many characters
 * have come, with no bound in time, so a quiet server's last lines would wait for the next burst.
 */
export class BatchedOutput {
  private pending = '';
  private timer: NodeJS.Timeout | undefined;

  readonly inner: pino.DestinationStream & { flush?: (cb?: (err?: Error) => void) => void };

  constructor(inner: BatchedOutput['inner']) {
    this.inner = inner;
    // Before pino's exit hook of the inner stream (registered when it was made): the held lines reach it first.
    process.prependListener('exit', this.handOn);
  }

  write(line: string): boolean {
    this.pending += line;
    if (this.pending.length >= BATCH_CHARS) this.handOn();
    else this.timer ??= setTimeout(this.handOn, BATCH_MS).unref();
    return true;
  }

  /** Hands the held lines on now. */
  readonly handOn = (): void => {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.pending === '') return;
    const lines = this.pending;
    this.pending = '';
    this.inner.write(lines);
  };

  /** pino's `logger.flush(cb)`. */
  flush(cb?: (err?: Error) => void): void {
    this.handOn();
    if (typeof this.inner.flush === 'function') this.inner.flush(cb);
    else cb?.();
  }
}

/** Fields of a line that no redaction path can match: top-level strings, numbers and booleans only. */
export type FlatFields = Readonly<Record<string, string | number | boolean | undefined>>;

/** Writes lines of flat fields only; the type is what keeps a nested object (where secrets live) out of them. */
export interface FlatLines {
  info(fields: FlatFields, msg: string): void;
}

const flat = new WeakMap<Logger, FlatLines>();

/**
 * The same lines as `log` writes, without the redaction pass, for the lines a server writes on every request
 * (the access line, the `tool call` line). Every redaction path names a nested member (`req.headers.cookie`,
 * `*.token`: a member of a top-level object), so a line of flat fields is written the same with or without it;
 * but with a wildcard path pino runs every top-level value of every line, and every child binding, through the
 * redactor (docs/performance.md: ~19 µs of a tool call's ~150). Made once per logger.
 */
export function flatLines(log: Logger): FlatLines {
  let lines = flat.get(log);
  if (lines === undefined) {
    lines = log.child({}, { redact: [] });
    flat.set(log, lines);
  }
  return lines;
}

/**
 * A child of `log` with these bindings, made the first time it is asked for: a request's or a call's logger that
 * most requests never write through (their per-request lines are flat lines), so it is not built for them.
 */
export function lazyChild(log: Logger, bindings: pino.Bindings): () => Logger {
  let child: Logger | undefined;
  return () => {
    child ??= log.child(bindings);
    return child;
  };
}

interface Output {
  flushSync?: () => void;
  /** sonic-boom's state: a write in flight, bytes not yet written. */
  _writing?: boolean;
  _len?: number;
}

/**
 * Waits (at most `ms`) until the lines logged so far are written, then seals the output: pino's own flush at
 * exit (synchronous) becomes a no-op. That flush retries a write failing with EPIPE for ever, so a server whose
 * output reader had died never exited on SIGTERM. Waiting first lets the asynchronous write finish or fail (a
 * failure with EPIPE turns pino's output off by itself); sealing covers a reader that stalled. At worst the
 * lines a stalled reader did not take within `ms` are lost.
 */
export async function flushLogs(log: Logger, ms: number): Promise<void> {
  const given = (log as unknown as Record<symbol, Output | BatchedOutput | undefined>)[
    pino.symbols.streamSym
  ];
  // A batched output's held lines are handed on at every look, so lines logged while waiting are waited for too.
  const batched = given instanceof BatchedOutput ? given : undefined;
  const out = batched ? (batched.inner as Output) : (given as Output | undefined);
  if (!out) return;
  const deadline = Date.now() + ms;
  for (;;) {
    batched?.handOn();
    if (!(out._writing === true || (out._len ?? 0) > 0) || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  if (typeof out.flushSync === 'function') out.flushSync = () => {};
}
