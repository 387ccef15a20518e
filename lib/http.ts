import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { traceOf } from './telemetry/request.ts';

/** A client's mistake in the HTTP envelope (size, encoding, syntax), before any endpoint logic runs. */
export class HttpInputError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'HttpInputError';
    this.status = status;
  }
}

export const DEFAULT_BODY_LIMIT = 64 * 1024;
/**
 * How long a body may take to arrive whole once it is being read: a sender trickling one (anonymously, at the
 * token or registration endpoint) must not hold a connection and a request for long. The answer is 408, and
 * the server closes the connection (the unread rest of the body is never waited for).
 */
export const DEFAULT_BODY_TIMEOUT_MS = 10_000;

export function readBody(
  req: IncomingMessage,
  limit = DEFAULT_BODY_LIMIT,
  timeoutMs = DEFAULT_BODY_TIMEOUT_MS,
): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume();
    return Promise.reject(new HttpInputError(413, `request body exceeds ${limit} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (err?: Error) => {
      clearTimeout(timer);
      req.off('data', onData).off('end', onEnd).off('error', stop);
      if (err) reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop(new HttpInputError(413, `request body exceeds ${limit} bytes`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const timer = setTimeout(
      () =>
        stop(new HttpInputError(408, `the request body did not arrive whole within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    req.on('data', onData).on('end', onEnd).on('error', stop);
  });
}

/** The request's media type, lowercased, without parameters ('' when there is no Content-Type). */
export function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/** application/x-www-form-urlencoded body; a repeated parameter is a request error (RFC 6749 §3.1). */
export async function readForm(req: IncomingMessage, limit?: number): Promise<Map<string, string>> {
  const form = await readFormBody(req, limit);
  // The token request's grant type on its span (`oauth.grant_type`); no other form value is ever traced, and
  // this one only as a registered grant name (anything else a client sends there is `other`).
  const grantType = form.get('grant_type');
  if (grantType !== undefined) {
    traceOf(req)?.set({ 'oauth.grant_type': GRANT_TYPE.test(grantType) ? grantType : 'other' });
  }
  return form;
}

const GRANT_TYPE =
  /^(?:authorization_code|refresh_token|client_credentials|password|urn:ietf:params:oauth:grant-type:(?:device_code|jwt-bearer|token-exchange|saml2-bearer)|urn:openid:params:grant-type:ciba)$/;

async function readFormBody(req: IncomingMessage, limit?: number): Promise<Map<string, string>> {
  if (mediaType(req) !== 'application/x-www-form-urlencoded') {
    throw new HttpInputError(400, 'content-type must be application/x-www-form-urlencoded');
  }
  const body = await readBody(req, limit);
  return parseParams(body.toString('utf8'));
}

export function parseParams(text: string): Map<string, string> {
  if (/%(?![0-9a-fA-F]{2})/.test(text)) throw new HttpInputError(400, 'malformed percent-encoding');
  const out = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(text)) {
    // NUL is valid UTF-8 but no OAuth parameter can hold it, and Postgres text cannot store it.
    if (k.includes('\u0000') || v.includes('\u0000'))
      throw new HttpInputError(400, 'parameters must not contain NUL');
    if (out.has(k)) {
      // RFC 8707 lets `resource` repeat; Codex sends the same one twice (openai/codex#28830). This provider
      // issues one audience, so a repeat of the same value is one resource, and different values are refused.
      if (k === 'resource' && out.get(k) === v) continue;
      throw new HttpInputError(400, `parameter "${k}" given more than once`);
    }
    out.set(k, v);
  }
  return out;
}

export async function readJson(req: IncomingMessage, limit?: number): Promise<unknown> {
  if (mediaType(req) !== 'application/json')
    throw new HttpInputError(400, 'content-type must be application/json');
  const text = (await readBody(req, limit)).toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpInputError(400, 'body is not valid JSON');
  }
  if (text.includes('\\u0000') || text.includes('\u0000'))
    throw new HttpInputError(400, 'JSON strings must not contain NUL');
  return value;
}

export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  // Accept a caller's id only when it is short and plain, so it cannot inject into logs or headers.
  if (typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given)) return given;
  return randomUUID();
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string | string[]> = {},
): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export function redirect(res: ServerResponse, location: string, headers: Record<string, string> = {}): void {
  res.writeHead(302, { location, 'content-length': 0, 'cache-control': 'no-store', ...headers });
  res.end();
}

export function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!header) return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const name = part.slice(0, i).trim();
    let value = part.slice(i + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    try {
      value = decodeURIComponent(value);
    } catch {
      // keep the raw value: a malformed cookie simply matches no session
    }
    if (name && !out.has(name)) out.set(name, value);
  }
  return out;
}
