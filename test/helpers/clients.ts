import { type KeyObject, randomUUID, type webcrypto } from 'node:crypto';
import { createServer } from 'node:http';
import { SignJWT } from 'jose';

/** POST /oauth/register (RFC 7591) with a JSON body; returns status and the parsed answer. */
export async function registerClient(base: string, metadata: Record<string, unknown>) {
  const res = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> & { client_id: string } };
}

/**
 * A native client's loopback redirect target: a real HTTP server on 127.0.0.1 that records every request it
 * gets (the authorization response arrives as its query) and answers with a short page.
 */
export async function startCallbackServer() {
  const hits: URL[] = [];
  const waiters: Array<(u: URL) => void> = [];
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    hits.push(u);
    for (const w of waiters.splice(0)) w(u);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('callback received; you can close this tab');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    hits,
    /** The next request to arrive (or the last one, if it already did after `since` hits). */
    next(since = hits.length): Promise<URL> {
      if (hits.length > since) return Promise.resolve(hits[since]!);
      return new Promise((resolve) => waiters.push(resolve));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** An RFC 7523 client assertion (private_key_jwt) for `clientId`, signed with `key`; claims may be overridden. */
export async function clientAssertion(
  key: webcrypto.CryptoKey | KeyObject,
  o: { clientId: string; aud: string; alg?: string; kid?: string; claims?: Record<string, unknown> },
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: o.clientId,
    sub: o.clientId,
    aud: o.aud,
    jti: randomUUID(),
    iat: now,
    exp: now + 120,
    ...o.claims,
  };
  for (const k of Object.keys(claims)) if (claims[k] === undefined) delete claims[k];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: o.alg ?? 'ES256', ...(o.kid ? { kid: o.kid } : {}) })
    .sign(key);
}

export const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** `Authorization: Basic` for client_secret_basic (RFC 6749 §2.3.1: each part form-encoded first). */
export function basicAuth(clientId: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString('base64')}`;
}
