import type { IncomingMessage } from 'node:http';
import { HttpInputError, readBody } from '../../lib/http.ts';
import { bodySha256, type Identity, IdentityError, verifyIdentity } from '../../lib/identity.ts';
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../lib/json-depth.ts';
import { JsonRpcHttpError, UnauthorizedError } from './errors.ts';

export interface AuthenticatedRequest {
  /** The caller, as the gateway signed it for this very request. */
  identity: Identity;
  /** A POST's JSON-RPC body, parsed; undefined for other methods (GET, DELETE carry none). */
  body: unknown;
}

export interface AuthenticateOptions {
  /** TOOL_IDENTITY_KEY: this service's own identity key. */
  key: string;
  service: string;
  /** Largest body read. */
  bodyLimit: number;
  now?: number;
}

/**
 * The caller, from the gateway's signed headers only (a tool server never sees a bearer, so these headers are the
 * whole of its trust in who is calling), bound to this request: the raw body is read and hashed exactly as it
 * arrived before anything parses it, and the signature must cover this service, method, path and body. Missing,
 * forged, replayed onto another request or stale (over 60 s) → 401 UNAUTHORIZED. Only then is the body parsed
 * for the MCP transport (unparsable, or nested deeper than 64 levels → JSON-RPC −32700).
 */
export async function readAuthenticatedRequest(
  req: IncomingMessage,
  opts: AuthenticateOptions,
): Promise<AuthenticatedRequest> {
  let raw: Buffer;
  try {
    raw = await readBody(req, opts.bodyLimit);
  } catch (err) {
    if (err instanceof HttpInputError) throw new JsonRpcHttpError(err.status, -32600, err.message);
    throw err;
  }
  let identity: Identity;
  try {
    identity = verifyIdentity(
      opts.key,
      {
        service: opts.service,
        method: req.method ?? '',
        path: req.url ?? '',
        bodySha256: bodySha256(raw),
      },
      req.headers,
      opts.now,
    );
  } catch (err) {
    if (err instanceof IdentityError) throw new UnauthorizedError(err.message);
    throw err;
  }
  if (req.method !== 'POST') return { identity, body: undefined };
  // Before JSON.parse and the SDK: its request conversion recurses, and ~10 000 levels overflow the stack.
  if (jsonTooDeep(raw)) {
    throw new JsonRpcHttpError(400, -32700, `Parse error: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    return { identity, body: JSON.parse(raw.toString('utf8')) };
  } catch {
    throw new JsonRpcHttpError(400, -32700, 'Parse error: body is not valid JSON');
  }
}
