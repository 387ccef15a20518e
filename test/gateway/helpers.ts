// Collaborators of the gateway tests: a key server (stands in for the platform issuer's or Entra's JWKS), a
// tiny upstream tool server that records what reaches it, token minting with jose (independent of the
// gateway's own JWS code), and the gateway as a real `platform gateway` process.
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, randomUUID } from 'node:crypto';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { calculateJwkThumbprint, exportJWK, type JWK, SignJWT } from 'jose';
import { bodySha256, deriveIdentityKey, type Identity, verifyIdentity } from '../../lib/identity.ts';
import { jwksKey } from '../../lib/revocation.ts';
import { type GatewayProcess, startGatewayProcess as startProcess } from '../helpers/processes.ts';

export const IDENTITY_SECRET = 'gateway-test-identity-secret-0123456789abcdef';
/** The audience of the platform tokens minted with a stand-in key server. */
export const AUDIENCE = 'https://platform.test/api';

/**
 * Checks the identity headers a recorded request carried, as the tool server of `service` (default: the first
 * path segment) would: with that service's own key, over the method, path and body it received.
 */
export function verifyRecorded(r: RecordedRequest, service?: string, now?: number): Identity {
  const name = service ?? r.url.split('/')[1]!;
  return verifyIdentity(
    deriveIdentityKey(IDENTITY_SECRET, name),
    { service: name, method: r.method, path: r.url, bodySha256: bodySha256(r.rawBody) },
    r.headers,
    now,
  );
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicJwk: JWK;
}

export async function newSigningKey(
  kid = `k-${randomBytes(6).toString('hex')}`,
  bits = 2048,
): Promise<SigningKey> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return { kid, privateKey, publicJwk };
}

export interface KeyServer {
  url: string;
  /** The JWKS location. */
  jwksUrl: string;
  /** An issuer value served by this key server (discovery at `${issuer}/.well-known/openid-configuration`). */
  issuer: string;
  keys: SigningKey[];
  /** JWKS GETs served so far. */
  fetches(): number;
  /** Answer 500 (true) or the key set (false). */
  failing: boolean;
  /** Extra delay before answering, ms. */
  delayMs: number;
  /** The key set's Cache-Control header; undefined: none sent. */
  cacheControl: string | undefined;
  close(): Promise<void>;
}

export async function startKeyServer(initial?: SigningKey[]): Promise<KeyServer> {
  let fetches = 0;
  const state = {
    keys: initial ?? [await newSigningKey()],
    failing: false,
    delayMs: 0,
    cacheControl: undefined as string | undefined,
  };
  let base = '';
  const server = createServer((req, res) => {
    const answer = () => {
      if (req.url === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ issuer: base, jwks_uri: `${base}/keys` }));
        return;
      }
      if (req.url !== '/keys') {
        res.writeHead(404).end();
        return;
      }
      fetches += 1;
      if (state.failing) {
        res.writeHead(500).end('down');
        return;
      }
      res.writeHead(200, {
        'content-type': 'application/json',
        ...(state.cacheControl ? { 'cache-control': state.cacheControl } : {}),
      });
      res.end(JSON.stringify({ keys: state.keys.map((k) => k.publicJwk) }));
    };
    if (state.delayMs > 0) setTimeout(answer, state.delayMs);
    else answer();
  });
  const port = await listen(server);
  base = `http://127.0.0.1:${port}`;
  return Object.assign(state, {
    url: base,
    jwksUrl: `${base}/keys`,
    issuer: base,
    fetches: () => fetches,
    close: () => closeServer(server),
  });
}

export interface MintOptions {
  key: SigningKey;
  claims: Record<string, unknown>;
  header?: Record<string, unknown>;
  /** Seconds relative to now; defaults: iat now, exp +3600. */
  iat?: number;
  exp?: number;
}

/** An RS256 token signed with jose; `claims` override the defaults (a null value removes the claim). */
export async function mint(o: MintOptions): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iat: now + (o.iat ?? 0),
    exp: now + (o.exp ?? 3600),
    jti: randomUUID(),
    ...o.claims,
  };
  for (const k of Object.keys(claims)) if (claims[k] === null) delete claims[k];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: o.key.kid, typ: 'at+jwt', ...o.header })
    .sign(o.key.privateKey);
}

/** An HS256 token of a service's own issuer, signed with jose. */
export async function mintHs256(
  secret: string,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
) {
  const now = Math.floor(Date.now() / 1000);
  const all: Record<string, unknown> = { iat: now, exp: now + 3600, jti: randomUUID(), ...claims };
  for (const k of Object.keys(all)) if (all[k] === null) delete all[k];
  return new SignJWT(all).setProtectedHeader({ alg: 'HS256', ...header }).sign(Buffer.from(secret));
}

/** Base64url JSON, for hand-built hostile tokens. */
export function b64(v: unknown): string {
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
}

/** An RS256 platform token of key server `ks` (its first key): scope mcp:mail and a fresh sub unless `claims` say otherwise. */
export function platformToken(
  ks: KeyServer,
  claims: Record<string, unknown> = {},
  o: { iat?: number } = {},
): Promise<string> {
  return mint({
    key: ks.keys[0]!,
    claims: { iss: ks.issuer, aud: AUDIENCE, sub: `s-${randomUUID()}`, scope: 'mcp:mail', ...claims },
    ...o,
  });
}

/** A stand-in Entra tenant: a key server, the tenant id and the mail service's app (client) id. */
export interface EntraTenant extends KeyServer {
  tenant: string;
  clientId: string;
  /** A v2 access token for the mail app, as an Entra connector holds one; `claims` override (null removes). */
  token(claims?: Record<string, unknown>, iat?: number): Promise<string>;
}

export async function startEntra(
  tenant: string = randomUUID(),
  clientId: string = randomUUID(),
): Promise<EntraTenant> {
  const ks = await startKeyServer();
  return Object.assign(ks, {
    tenant,
    clientId,
    token: (claims: Record<string, unknown> = {}, iat?: number) =>
      mint({
        key: ks.keys[0]!,
        iat,
        claims: {
          iss: `https://login.microsoftonline.com/${tenant}/v2.0`,
          aud: clientId,
          sub: `pairwise-${randomUUID()}`,
          oid: randomUUID(),
          azp: 'connector',
          scp: 'mcp.access',
          uti: randomUUID(),
          ...claims,
        },
      }),
  });
}

/** An HS256 token of the mail service's own issuer for `audience`, valid 10 minutes from now; `claims` override. */
export function mailServiceToken(
  secret: string,
  audience: string,
  claims: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return mintHs256(secret, {
    iss: 'mail',
    aud: audience,
    sub: `svc-${randomUUID()}`,
    iat: now,
    exp: now + 600,
    jti: randomUUID(),
    ...claims,
  });
}

/** Deletes the shared key-set copies of `issuers`: issuers are per-port URLs, and another run may have left one. */
export async function forgetSharedKeySets(redisUrl: string, ...issuers: string[]): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    await redis.del(...issuers.map(jwksKey));
  } finally {
    await redis.quit();
  }
}

export interface GatewayEnvOptions {
  /** Service name → its upstream(s): GATEWAY_SERVICES and each `<NAME>_MCP_UPSTREAM`. */
  services: Record<string, string>;
  redisUrl: string;
  /** The platform issuer: a key server (issuer, JWKS URL, this file's AUDIENCE) or an IdP (discovery). */
  platform?: KeyServer | { issuer: string; audience: string };
  /** Entra for the mail service: tenant, app id and the tenant's JWKS URL. */
  entra?: EntraTenant;
  /** PUBLIC_BASE_URL (default https://mcp.example.test). */
  base?: string;
}

/** The environment of a `platform gateway` as most tests run it; `extra` adds or overrides (undefined removes). */
export function gatewayEnv(
  o: GatewayEnvOptions,
  extra: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    PUBLIC_BASE_URL: o.base ?? 'https://mcp.example.test',
    GATEWAY_SERVICES: Object.keys(o.services).join(','),
  };
  for (const [name, url] of Object.entries(o.services)) env[`${name.toUpperCase()}_MCP_UPSTREAM`] = url;
  if (o.platform && 'jwksUrl' in o.platform) {
    Object.assign(env, {
      PLATFORM_ISSUER: o.platform.issuer,
      PLATFORM_JWKS_URL: o.platform.jwksUrl,
      PLATFORM_AUDIENCE: AUDIENCE,
    });
  } else if (o.platform) {
    Object.assign(env, { PLATFORM_ISSUER: o.platform.issuer, PLATFORM_AUDIENCE: o.platform.audience });
  }
  if (o.entra) {
    Object.assign(env, {
      MAIL_MCP_CLIENT_ID: o.entra.clientId,
      IDP_TENANT_ID: o.entra.tenant,
      ENTRA_JWKS_URL: o.entra.jwksUrl,
    });
  }
  return { ...env, REDIS_URL: o.redisUrl, ...extra };
}

/** A key server (the platform issuer) and a recording upstream; gateways in front of them as `mail`. */
export interface GatewayStack {
  ks: KeyServer;
  upstream: Upstream;
  /** `gatewayEnv` for this stack (`extra` adds or overrides). */
  env(extra?: Record<string, string | undefined>): Record<string, string | undefined>;
  /** Starts a gateway with `env(extra)`; stopped with the stack. */
  gateway(extra?: Record<string, string | undefined>): Promise<GatewayProcess>;
  stop(): Promise<void>;
}

/** Without `redisUrl` (an in-process gateway) no shared key set is forgotten and `gateway()` needs REDIS_URL in `extra`. */
export async function startGatewayStack(redisUrl?: string): Promise<GatewayStack> {
  const [ks, upstream] = await Promise.all([startKeyServer(), startUpstream()]);
  if (redisUrl) await forgetSharedKeySets(redisUrl, ks.issuer);
  const gateways: GatewayProcess[] = [];
  const env = (extra: Record<string, string | undefined> = {}) =>
    gatewayEnv({ services: { mail: upstream.url }, platform: ks, redisUrl: redisUrl ?? '' }, extra);
  return {
    ks,
    upstream,
    env,
    async gateway(extra) {
      const gw = await startGatewayProcess(env(extra));
      gateways.push(gw);
      return gw;
    },
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      await Promise.all([ks.close(), upstream.close()]);
    },
  };
}

/** A tool call (POST, a small JSON-RPC body) to the mail service through `gw` with this bearer. */
export const postMail = (gw: { url: string }, token: string): Promise<GatewayResponse> =>
  call(`${gw.url}/mail/mcp`, { method: 'POST', token });

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  rawBody?: Buffer;
  /** The gateway-side port of the connection (distinct values = distinct upstream connections). */
  remotePort?: number;
}

export interface Upstream {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Requests whose connection closed before the upstream finished answering. */
  aborted: string[];
  /** SSE streams waiting for events, by the stream id in the path (`/<svc>/sse/<id>`). */
  streams: Map<string, ServerResponse>;
  waitForStream(id: string): Promise<ServerResponse>;
  close(): Promise<void>;
}

/**
 * A stand-in tool server:
 *   /<svc>/health         200 {"status":"ok"}
 *   /<svc>/sse/<id>       SSE stream held open for the test to write to
 *   /<svc>/hang           never answers (records the abort when the gateway closes it)
 *   /<svc>/slow?ms=N      answers after N ms
 *   anything else         echoes the request as JSON (method, url, headers, body)
 */
export async function startUpstream(port = 0): Promise<Upstream> {
  const requests: RecordedRequest[] = [];
  const aborted: string[] = [];
  const streams = new Map<string, ServerResponse>();
  const streamWaiters = new Map<string, (res: ServerResponse) => void>();
  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    const url = req.url ?? '';
    if (url.includes('/sse/')) {
      const id = url.slice(url.lastIndexOf('/') + 1);
      requests.push({ method: req.method!, url, headers: req.headers, rawHeaders: req.rawHeaders, body: '' });
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        'mcp-session-id': 'sess-1',
      });
      res.flushHeaders();
      res.on('close', () => {
        if (!res.writableFinished) aborted.push(url);
      });
      streams.set(id, res);
      streamWaiters.get(id)?.(res);
      return;
    }
    if (url.endsWith('/hang')) {
      requests.push({ method: req.method!, url, headers: req.headers, rawHeaders: req.rawHeaders, body: '' });
      res.on('close', () => aborted.push(url));
      return;
    }
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks);
    const body = rawBody.toString('utf8');
    requests.push({
      method: req.method!,
      url,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body,
      rawBody,
      remotePort: req.socket.remotePort,
    });
    if (url.endsWith('/health')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    if (url.endsWith('/chunked')) {
      // As the MCP SDK answers: JSON without a Content-Length, the whole body in one chunk, then the end.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { bodyLength: body.length } }));
      res.end();
      return;
    }
    const slow = /[?&]ms=(\d+)/.exec(url);
    if (url.includes('/slow') && slow) await new Promise((r) => setTimeout(r, Number(slow[1])));
    const payload = JSON.stringify({
      method: req.method,
      url,
      headers: req.headers,
      bodyLength: body.length,
      body,
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
      'mcp-session-id': 'sess-1',
      'x-upstream': 'yes',
      'set-cookie': ['a=1', 'b=2'],
    });
    res.end(payload);
  };
  const server = createServer((req, res) => void handler(req, res));
  server.listen(port, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    requests,
    aborted,
    streams,
    waitForStream(id) {
      const s = streams.get(id);
      if (s) return Promise.resolve(s);
      return new Promise((resolve) => streamWaiters.set(id, resolve));
    },
    close: () => closeServer(server),
  };
}

export type { GatewayProcess };

/** A real `platform gateway` on a free port with this suite's identity secret; resolves once it listens. */
export function startGatewayProcess(env: Record<string, string | undefined>): Promise<GatewayProcess> {
  return startProcess({ GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET, LOG_LEVEL: 'info', ...env });
}

export interface GatewayResponse {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted structurally by the tests
  json: Record<string, any>;
}

export interface CallOptions {
  method?: string;
  token?: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
}

/**
 * One request through node:http (not fetch: it must be able to send any Host, Origin or forged header, and add
 * nothing of its own). POSTs default to a small JSON-RPC body.
 */
export function call(url: string, o: CallOptions = {}): Promise<GatewayResponse> {
  const method = o.method ?? 'GET';
  const headers: Record<string, string | string[]> = { ...o.headers };
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  let body = o.body;
  if (body === undefined && method === 'POST') body = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
  if (body !== undefined && headers['content-type'] === undefined)
    headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    // The path is sent exactly as written: URL parsing would resolve dot segments before they reach the gateway.
    const u = new URL(url);
    const path = url.slice(u.origin.length) || '/';
    const req = httpRequest(
      { host: u.hostname, port: u.port, path, method, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          // biome-ignore lint/suspicious/noExplicitAny: as GatewayResponse.json
          let json: Record<string, any> = {};
          try {
            json = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The spec's error body, flattened for assertions. */
export function errorOf(r: GatewayResponse): {
  code: string;
  reason: string;
  message: string;
  requestId: string;
} {
  const e = r.json.error as
    | { code: string; message: string; context: { request_id: string; reason: string } }
    | undefined;
  return {
    code: e?.code ?? '',
    reason: e?.context?.reason ?? '',
    message: e?.message ?? '',
    requestId: e?.context?.request_id ?? '',
  };
}

/** A client's DPoP key (ES256) and its RFC 7638 thumbprint, the `cnf.jkt` of tokens bound to it. */
export interface DpopKey {
  privateKey: KeyObject;
  publicJwk: JWK;
  jkt: string;
}

export async function newDpopKey(): Promise<DpopKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const publicJwk = await exportJWK(publicKey);
  return { privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk, 'sha256') };
}

/** A DPoP proof (RFC 9449 §4.2) for `htm` `htu` and the access token's `ath`; `claims` override (null removes). */
export function dpopProof(
  key: DpopKey,
  o: { htm: string; htu: string; token?: string; iat?: number; claims?: Record<string, unknown> },
): Promise<string> {
  const claims: Record<string, unknown> = {
    jti: randomUUID(),
    htm: o.htm,
    htu: o.htu,
    iat: Math.floor(Date.now() / 1000) + (o.iat ?? 0),
    ...(o.token === undefined ? {} : { ath: createHash('sha256').update(o.token).digest('base64url') }),
    ...o.claims,
  };
  for (const k of Object.keys(claims)) if (claims[k] === null) delete claims[k];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.publicJwk })
    .sign(key.privateKey);
}

/** A tool call to the mail service through `gw` as `Authorization: DPoP`, with `proof` (none when undefined). */
export const postMailDpop = (
  gw: { url: string },
  token: string,
  proof: string | undefined,
): Promise<GatewayResponse> =>
  call(`${gw.url}/mail/mcp`, {
    method: 'POST',
    headers: { authorization: `DPoP ${token}`, ...(proof === undefined ? {} : { dpop: proof }) },
  });
