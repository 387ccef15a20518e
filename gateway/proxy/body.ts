import type { IncomingMessage } from 'node:http';
import { BodyTimeoutError, type GatewayError, PayloadTooLargeError } from '../errors.ts';
import type { InboundHeaders } from './headers.ts';

/** GATEWAY_MAX_BODY_BYTES and GATEWAY_BODY_TIMEOUT_MS, shared by every request of one gateway. */
export interface BodyLimits {
  maxBytes: number;
  timeoutMs: number;
}

/** The body, whole; `null` for a request without one. */
export type BodyDone = (err: GatewayError | null, body: Buffer | null) => void;

/**
 * Reads a request body whole before anything is signed or forwarded: the identity signature covers the body's
 * SHA-256, so the gateway must hold all of it first. Beyond `maxBytes` (declared or counted) → 413; not whole
 * within `timeoutMs` of the start of reading → 408 (a slow sender cannot hold a request open for minutes).
 * `done` is called once, or never when the client goes away mid-body (nothing is left to answer).
 *
 * The length and framing come from the header scan (proxy/headers.ts), so `req.headers` is never built.
 */
export function readWholeBody(
  req: IncomingMessage,
  framing: Pick<InboundHeaders, 'contentLength' | 'chunked'>,
  limits: BodyLimits,
  done: BodyDone,
): void {
  const declaredLength = framing.contentLength;
  if (!framing.chunked && (declaredLength === undefined || declaredLength === '0')) {
    done(null, null);
    return;
  }
  if (declaredLength !== undefined && Number(declaredLength) > limits.maxBytes) {
    done(new PayloadTooLargeError(limits.maxBytes), null);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const finish = (err: GatewayError | null, body: Buffer | null): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('close', onClose);
    if (err) req.pause();
    done(err, body);
  };
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    if (size > limits.maxBytes) finish(new PayloadTooLargeError(limits.maxBytes), null);
    else chunks.push(chunk);
  };
  const onEnd = (): void => {
    finish(null, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  };
  // Closed before the end: the client reset or went away mid-body; there is no one left to answer.
  const onClose = (): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
  };
  const timer = setTimeout(() => finish(new BodyTimeoutError(limits.timeoutMs), null), limits.timeoutMs);
  req.on('data', onData);
  req.once('end', onEnd);
  req.once('close', onClose);
  // A reset mid-body emits 'error' too; without a listener it would be thrown.
  req.once('error', noop);
}

function noop(): void {}
