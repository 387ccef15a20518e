import type { IncomingMessage } from 'node:http';
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../lib/json-depth.ts';
import { BadRequestError, BodyTimeoutError, type GatewayError, PayloadTooLargeError } from '../errors.ts';
import type { InboundHeaders } from './headers.ts';

/** GATEWAY_MAX_BODY_BYTES and GATEWAY_BODY_TIMEOUT_MS, shared by every request of one gateway. */
export interface BodyLimits {
  maxBytes: number;
  timeoutMs: number;
}

/** The body, whole; `null` for a request without one. */
export type BodyDone = (err: GatewayError | null, body: Buffer | null) => void;

export interface BodyReader {
  /**
   * Reads a request body whole before anything is signed or forwarded: the identity signature covers the body's
   * SHA-256, so the gateway must hold all of it first. Beyond `maxBytes` (declared or counted) → 413; not whole
   * within `timeoutMs` of the start of reading → 408 (a slow sender cannot hold a request open for minutes);
   * JSON nested deeper than MAX_JSON_DEPTH (lib/json-depth.ts) → 400 `json_too_deep`, whatever its Content-Type
   * (tool servers read every POST body as JSON-RPC).
   * `done` is called once, or never when the client goes away mid-body (nothing is left to answer).
   * The length and framing come from the header scan (proxy/headers.ts), so `req.headers` is never built.
   */
  read(
    req: IncomingMessage,
    framing: Pick<InboundHeaders, 'contentLength' | 'chunked'>,
    done: BodyDone,
  ): void;
  /** Stops the timeout sweep (at shutdown). */
  close(): void;
}

const kPending = Symbol('gateway.pendingBody');
type TrackedRequest = IncomingMessage & { [kPending]?: PendingBody };

/** One body being read. The request's listeners are shared functions that find it through the request. */
class PendingBody {
  readonly req: TrackedRequest;
  readonly done: BodyDone;
  readonly maxBytes: number;
  readonly deadline: number;
  readonly chunks: Buffer[] = [];
  size = 0;
  readonly #pending: Set<PendingBody>;

  constructor(req: TrackedRequest, done: BodyDone, limits: BodyLimits, pending: Set<PendingBody>) {
    this.req = req;
    this.done = done;
    this.maxBytes = limits.maxBytes;
    this.deadline = performance.now() + limits.timeoutMs;
    this.#pending = pending;
  }

  /** Detaches from the request; false when it already was (a second outcome is ignored). */
  settle(): boolean {
    if (this.req[kPending] !== this) return false;
    this.req[kPending] = undefined;
    this.#pending.delete(this);
    this.req.off('data', onData);
    this.req.off('end', onEnd);
    this.req.off('close', onClose);
    return true;
  }

  fail(err: GatewayError): void {
    if (!this.settle()) return;
    this.req.pause();
    this.done(err, null);
  }
}

// Module-level listeners (no closure per request); `this` is the request.
function onData(this: TrackedRequest, chunk: Buffer): void {
  const p = this[kPending];
  if (!p) return;
  p.size += chunk.length;
  if (p.size > p.maxBytes) p.fail(new PayloadTooLargeError(p.maxBytes));
  else p.chunks.push(chunk);
}

function onEnd(this: TrackedRequest): void {
  const p = this[kPending];
  if (!p?.settle()) return;
  const body = p.chunks.length === 1 ? p.chunks[0]! : Buffer.concat(p.chunks, p.size);
  // Before anything parses it (here or at the tool server): deep nesting is cheap to send, costly to convert.
  if (jsonTooDeep(body)) p.done(new BadRequestError('json_too_deep', TOO_DEEP), null);
  else p.done(null, body);
}

const TOO_DEEP = `request body nests JSON deeper than ${MAX_JSON_DEPTH} levels`;

// Closed before the end: the client reset or went away mid-body; there is no one left to answer.
function onClose(this: TrackedRequest): void {
  this[kPending]?.settle();
}

// A reset mid-body emits 'error' too; without a listener it would be thrown.
function ignore(): void {}

export function createBodyReader(limits: BodyLimits): BodyReader {
  const pending = new Set<PendingBody>();
  // One sweep for every body in flight instead of a timer per request (a request's timer would be armed and
  // cleared on the hot path): a slow body gets its 408 between timeoutMs and timeoutMs + one sweep interval.
  const interval = Math.max(25, Math.min(250, Math.floor(limits.timeoutMs / 4)));
  let sweeper: NodeJS.Timeout | undefined;
  const sweep = (): void => {
    const now = performance.now();
    for (const p of pending) if (p.deadline <= now) p.fail(new BodyTimeoutError(limits.timeoutMs));
    if (pending.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };

  return {
    read(req, framing, done) {
      const declared = framing.contentLength;
      if (!framing.chunked && (declared === undefined || declared === '0')) {
        done(null, null);
        return;
      }
      if (declared !== undefined && Number(declared) > limits.maxBytes) {
        done(new PayloadTooLargeError(limits.maxBytes), null);
        return;
      }
      const r = req as TrackedRequest;
      const p = new PendingBody(r, done, limits, pending);
      r[kPending] = p;
      pending.add(p);
      if (sweeper === undefined) {
        sweeper = setInterval(sweep, interval);
        sweeper.unref();
      }
      r.on('data', onData);
      r.on('end', onEnd);
      r.on('close', onClose);
      if (r.listenerCount('error') === 0) r.on('error', ignore);
    },
    close() {
      clearInterval(sweeper);
      sweeper = undefined;
    },
  };
}
