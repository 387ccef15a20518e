// Replaying a real MCP client against the real stack (IdP, gateway, tool servers, a seeded user): each request
// is sent exactly as the test writes it (parameter order, duplicates, spacing kept), the user's consent is
// answered through the page's own form without a browser, and vendor metadata documents that cannot be fetched
// here are pinned (PLATFORM_CIMD_PINNED_DIR) or served from a local https server trusted through a test CA.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll } from 'vitest';
import { toolJson } from '../tools/helpers.ts';
import { type Stack, startStack } from '../tools/stack.ts';
import { type SeededUser, seedUser } from './database.ts';
import { answerConsent, parseConsentForm, pkcePair, sessionCookieName } from './oauth.ts';
import { freePort } from './processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from './tls.ts';

export { pkcePair } from './oauth.ts';

/** Query or form parameters in the client's order; a name may repeat (Codex sends `resource` twice). */
export type Params = Array<[string, string]> | Record<string, string>;

const pairs = (p: Params): Array<[string, string]> => (Array.isArray(p) ? p : Object.entries(p));

export interface ReplayStackOptions {
  /** PLATFORM_ALLOWED_REDIRECT_URIS: the https (and custom-scheme) callbacks the operator lists. */
  allowedRedirectUris?: string[];
  /** Vendor metadata documents the operator pins (each names its own URL in `client_id`); a function gets
   * the local https server's origin (a `jwks_uri` served there) and the gateway's `{base_url}`. */
  pinned?:
    | Array<Record<string, unknown>>
    | ((at: { docsOrigin: string; baseUrl: string }) => Array<Record<string, unknown>>);
  /** Bodies served as JSON over https on localhost (the test CA), by path; `origin` is the server's. */
  documents?: (origin: string) => Record<string, unknown>;
  idpEnv?: Record<string, string>;
}

export interface ReplayStack {
  stack: Stack;
  user: SeededUser;
  issuer: string;
  /** The local https server's origin (`https://localhost:<port>`), where `documents` are served. */
  docsOrigin: string;
  /** Requests the local https server answered, as `METHOD path`. */
  docsRequests: string[];
  /** The MCP server URL of a service at the gateway (the resource its metadata names). */
  serverUrl(service?: string): string;
  /** What a client learns before signing in: the 401 challenge, the resource's and the IdP's metadata. */
  discover(service?: string): Promise<Discovery>;
  register(body: Record<string, unknown>): Promise<JsonAnswer>;
  /** GET /oauth/authorize with exactly these parameters, as the signed-in user; consent approved if shown. */
  authorize(params: Params): Promise<AuthorizeAnswer>;
  /** POST /oauth/token with exactly this form (and these headers, e.g. HTTP Basic). */
  token(form: Params, headers?: Record<string, string>): Promise<JsonAnswer>;
  /** The signed-in user's browser: the web session's cookie name and token. */
  browserSession(): { cookieName: string; sessionToken: string };
  /** Connects through the gateway with the access token, calls `whoami` and returns its JSON. */
  whoami(accessToken: string, service?: string): Promise<Record<string, unknown>>;
  /** One client's whole sign-in: authorize (consent approved), code exchange, one refresh, whoami. */
  signIn(flow: ClientFlow): Promise<SignedIn>;
  stop(): Promise<void>;
}

/** What a client sends at each step, built from the values only known then (exact order kept). */
export interface ClientFlow {
  authorize(p: { challenge: string; state: string }): Params;
  token(p: { code: string; verifier: string }): Params | Promise<Params>;
  refresh(p: { refreshToken: string }): Params | Promise<Params>;
  /** Extra token-request headers (HTTP Basic client authentication). */
  headers?: Record<string, string>;
  service?: string;
}

export interface SignedIn {
  authorize: AuthorizeAnswer;
  token: JsonAnswer;
  refreshed: JsonAnswer;
  /** whoami through the gateway with the refreshed access token. */
  me: Record<string, unknown>;
}

export interface Discovery {
  challenge: string;
  prm: Record<string, unknown> & {
    resource: string;
    authorization_servers: string[];
    scopes_supported: string[];
  };
  asm: Record<string, unknown> & { issuer: string; scopes_supported: string[] };
}

export interface JsonAnswer {
  status: number;
  headers: Headers;
  json: Record<string, unknown>;
  text: string;
}

export interface AuthorizeAnswer {
  status: number;
  /** Where the IdP sent the browser back (the client's redirect URI with code or error). */
  location: URL | undefined;
  code: string | undefined;
  consentShown: boolean;
  body: string;
}

async function answer(res: Response): Promise<JsonAnswer> {
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * The replay stack of one test file: started before its tests, stopped after them. The object it returns stands
 * for the running stack (use it inside tests and hooks only).
 */
export function useReplayStack(opts: ReplayStackOptions = {}): ReplayStack {
  let current: ReplayStack | undefined;
  beforeAll(async () => {
    current = await startReplayStack(opts);
  }, 90_000);
  afterAll(async () => {
    await current?.stop();
  });
  return new Proxy({} as ReplayStack, {
    get(_target, key) {
      if (!current) throw new Error('the replay stack is used before beforeAll started it');
      return Reflect.get(current, key);
    },
  });
}

export async function startReplayStack(opts: ReplayStackOptions = {}): Promise<ReplayStack> {
  const ca: TestCa = await createTestCa();
  const docsRequests: string[] = [];
  let bodies: Record<string, unknown> = {};
  const docs: TestHttpsServer = await startHttpsServer(ca, (req, res) => {
    docsRequests.push(`${req.method} ${req.url}`);
    const body = bodies[req.url ?? ''];
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  const docsOrigin = `https://localhost:${docs.port}`;
  bodies = opts.documents?.(docsOrigin) ?? {};
  const pinnedDir = await mkdtemp(join(tmpdir(), 'platform-pinned-'));
  const gatewayPort = await freePort();
  const baseUrl = `http://127.0.0.1:${gatewayPort}`;
  const pinned =
    typeof opts.pinned === 'function' ? opts.pinned({ docsOrigin, baseUrl }) : (opts.pinned ?? []);
  for (const [i, doc] of pinned.entries()) {
    await writeFile(join(pinnedDir, `${i}.json`), JSON.stringify(doc, null, 2));
  }
  let stack: Stack;
  try {
    stack = await startStack({
      gatewayPort,
      idpEnv: {
        // An operator who limits document hosts names the pinned documents' hosts too.
        PLATFORM_CIMD_ALLOWED_HOSTS: [
          `localhost:${docs.port}`,
          ...new Set(pinned.map((d) => new URL(String(d.client_id)).host)),
        ].join(','),
        PLATFORM_CIMD_CA_FILE: ca.caFile,
        ...(pinned.length ? { PLATFORM_CIMD_PINNED_DIR: pinnedDir } : {}),
        ...(opts.allowedRedirectUris?.length
          ? { PLATFORM_ALLOWED_REDIRECT_URIS: opts.allowedRedirectUris.join(',') }
          : {}),
        ...opts.idpEnv,
      },
    });
  } catch (err) {
    await docs.close();
    await ca.cleanup();
    await rm(pinnedDir, { recursive: true, force: true });
    throw err;
  }
  const user = await seedUser(stack.db.pool);
  const issuer = stack.idp.issuer;
  const cookieName = sessionCookieName(issuer);
  const serverUrl = (service = 'platform') => `${stack.baseUrl}/${service}/mcp`;

  const replay: ReplayStack = {
    stack,
    user,
    issuer,
    docsOrigin,
    docsRequests,
    serverUrl,
    browserSession: () => ({ cookieName, sessionToken: user.sessionToken }),
    async discover(service = 'platform') {
      const first = await fetch(serverUrl(service), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      await first.body?.cancel();
      const challenge = first.headers.get('www-authenticate') ?? '';
      const prmUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
      if (first.status !== 401 || !prmUrl) throw new Error(`no challenge: ${first.status} ${challenge}`);
      const prm = (await (await fetch(prmUrl)).json()) as Discovery['prm'];
      const as = new URL(prm.authorization_servers[0]!);
      const asm = (await (
        await fetch(`${as.origin}/.well-known/oauth-authorization-server${as.pathname.replace(/\/$/, '')}`)
      ).json()) as Discovery['asm'];
      return { challenge, prm, asm };
    },
    async register(body) {
      return answer(
        await fetch(`${issuer}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      );
    },
    async authorize(params) {
      const u = new URL(`${issuer}/oauth/authorize`);
      for (const [k, v] of pairs(params)) u.searchParams.append(k, v);
      const res = await fetch(u, {
        redirect: 'manual',
        headers: { cookie: `${cookieName}=${user.sessionToken}` },
      });
      let status = res.status;
      let location = res.headers.get('location');
      let body = await res.text();
      const consentShown = status === 200 && parseConsentForm(body) !== undefined;
      if (consentShown) {
        const a = await answerConsent({
          url: u.href,
          html: body,
          sessionToken: user.sessionToken,
          cookieName,
          decision: 'approve',
        });
        status = a.status;
        location = a.location?.href ?? null;
        body = a.body;
      }
      const loc = location ? new URL(location) : undefined;
      return { status, location: loc, code: loc?.searchParams.get('code') ?? undefined, consentShown, body };
    },
    async token(form, headers = {}) {
      const body = new URLSearchParams();
      for (const [k, v] of pairs(form)) body.append(k, v);
      return answer(
        await fetch(`${issuer}/oauth/token`, {
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            accept: 'application/json',
            ...headers,
          },
        }),
      );
    },
    async whoami(accessToken, service = 'platform') {
      const transport = new StreamableHTTPClientTransport(new URL(serverUrl(service)), {
        requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
      });
      const client = new Client({ name: 'replay', version: '1.0.0' });
      await client.connect(transport);
      try {
        return toolJson((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult);
      } finally {
        await transport.terminateSession().catch(() => {});
        await client.close();
      }
    },
    async signIn(flow) {
      const { verifier, challenge } = pkcePair();
      const state = randomBytes(12).toString('base64url');
      const a = await replay.authorize(flow.authorize({ challenge, state }));
      if (a.status !== 302 || !a.code) {
        const page = a.body.replace(/<style[\s\S]*?<\/style>|<[^>]+>/g, ' ').replace(/\s+/g, ' ');
        throw new Error(`authorize: ${a.status} ${a.location ?? ''} ${page.trim().slice(0, 400)}`);
      }
      if (a.location!.searchParams.get('state') !== state) throw new Error('state mismatch');
      const t = await replay.token(await flow.token({ code: a.code, verifier }), flow.headers);
      if (t.status !== 200) throw new Error(`code exchange: ${t.status} ${t.text}`);
      const refreshToken = t.json.refresh_token;
      if (typeof refreshToken !== 'string') throw new Error(`no refresh token: ${t.text}`);
      const rt = await replay.token(await flow.refresh({ refreshToken }), flow.headers);
      if (rt.status !== 200) throw new Error(`refresh: ${rt.status} ${rt.text}`);
      const me = await replay.whoami(rt.json.access_token as string, flow.service);
      return { authorize: a, token: t, refreshed: rt, me };
    },
    async stop() {
      await stack.stop();
      await docs.close();
      await ca.cleanup();
      await rm(pinnedDir, { recursive: true, force: true });
    },
  };
  return replay;
}

/** HTTP Basic client authentication (RFC 6749 §2.3.1: form-encoded id and secret). */
export function basicAuth(clientId: string, secret: string): Record<string, string> {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return { authorization: `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString('base64')}` };
}

/** A client's signing key for private_key_jwt (RFC 7523), its public JWKS and assertions signed with it. */
export async function clientKey(alg: 'ES256' | 'RS256' = 'ES256') {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), alg, use: 'sig', kid: `${alg.toLowerCase()}-1` };
  return {
    jwks: { keys: [jwk] },
    /** An assertion for `client_id`, audience `aud` (the issuer or the token endpoint), single use. */
    assertion(clientId: string, aud: string) {
      return new SignJWT({})
        .setProtectedHeader({ alg, kid: jwk.kid!, typ: 'JWT' })
        .setIssuer(clientId)
        .setSubject(clientId)
        .setAudience(aud)
        .setJti(crypto.randomUUID())
        .setIssuedAt()
        .setExpirationTime('2m')
        .sign(privateKey);
    },
  };
}

export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export interface RecordedRequest {
  method: string;
  url: string;
  /** A form body, parsed. */
  body: URLSearchParams | undefined;
  headers: Headers;
}

/** A fetch that records what a real client sends (to give an SDK as its `fetchFn`). */
export function recordingFetch(seen: RecordedRequest[]) {
  return (url: string | URL, init?: RequestInit) => {
    const body = init?.body;
    seen.push({
      method: init?.method ?? 'GET',
      url: new URL(url.toString()).href,
      body:
        body instanceof URLSearchParams
          ? new URLSearchParams(body)
          : typeof body === 'string'
            ? new URLSearchParams(body)
            : undefined,
      headers: new Headers(init?.headers),
    });
    return fetch(url, init);
  };
}
