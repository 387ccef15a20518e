// The IdP as an outbound-request amplifier (issue 34, red team): anonymous registration of a private_key_jwt
// client whose jwks_uri answers no-store or not a key set, then 60 anonymous token requests with junk assertions,
// made 60 outbound fetches — the jwks_uri was fetched on every token request, outside the metadata documents'
// per-address and per-host counters. Now every fetch a request causes (metadata documents, jwks_uri, trusted
// issuers' key sets) goes through one budget (idp/outbound): counted per client address and per host, and a
// failed or uncacheable answer is not fetched again within the 30 s cool-down. Real `platform idp` processes, a
// real https server on localhost (test CA) counting what it is asked, a stand-in enterprise IdP over http.

import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type EnterpriseIdp, startEnterpriseIdp } from '../helpers/enterprise-idp.ts';
import { JWT_BEARER_CLIENT } from '../helpers/machine-clients.ts';
import { authorizeRequest, postForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const REQUESTS = 60;

let db: TestDatabase;
let ca: TestCa;
let https: TestHttpsServer;
let broken: Server;
let ent: EnterpriseIdp;
let wide: IdpProcess; // limits far above the attack: only the cool-down bounds it
let tight: IdpProcess; // cimd_host=3/60: the one per-host budget, shared by every kind of fetch
let alice: SeededUser;
type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let legit: { privateKey: PrivateKey; jwk: JWK };
/** Requests the https server answered, by path (query string included). */
const asked: string[] = [];
/** Requests the broken key-set server answered. */
let brokenAsked = 0;
const issuersFile = join(tmpdir(), `trusted-issuers-outbound-${crypto.randomUUID()}.yaml`);
const count = (prefix: string) => asked.filter((p) => p.startsWith(prefix)).length;

beforeAll(async () => {
  [db, ca, ent] = await Promise.all([createTestDatabase(), createTestCa(), startEnterpriseIdp()]);
  const pair = await generateKeyPair('ES256', { extractable: true });
  legit = {
    privateKey: pair.privateKey,
    jwk: { ...(await exportJWK(pair.publicKey)), kid: 'legit', alg: 'ES256', use: 'sig' },
  };
  https = await startHttpsServer(ca, (req, res) => {
    const path = req.url ?? '';
    asked.push(path);
    const origin = `https://${req.headers.host}`;
    const json = (body: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    if (path.startsWith('/junk-jwks'))
      return json({ keys: 'not a key set' }, { 'cache-control': 'no-store' });
    if (path.startsWith('/nostore-jwks')) return json({ keys: [legit.jwk] }, { 'cache-control': 'no-store' });
    if (path.startsWith('/doc'))
      return json({
        client_id: `${origin}${path}`,
        redirect_uris: [`${origin}/cb`],
        token_endpoint_auth_method: 'none',
      });
    res.writeHead(404).end();
  });
  broken = createServer((_req, res) => {
    brokenAsked++;
    res.writeHead(500).end('down');
  });
  await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
  const brokenUri = `http://127.0.0.1:${(broken.address() as { port: number }).port}/jwks`;
  await writeFile(
    issuersFile,
    `issuers:
  - issuer: ${ent.issuer}
    jwks_uri: ${brokenUri}
    kind: id-jag
    email_domains: ["*"]
`,
  );
  alice = await seedUser(db.pool);
  const redisUrl = inject('redisUrl');
  const env = {
    PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${https.port}`,
    PLATFORM_CIMD_CA_FILE: ca.caFile,
    PLATFORM_TRUSTED_ISSUERS_FILE: issuersFile,
  };
  [wide, tight] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: { ...env, PLATFORM_RATE_LIMITS: 'cimd=1000/60,cimd_host=1000/60,register=1000/60' },
    }),
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: { ...env, PLATFORM_RATE_LIMITS: 'cimd=1000/60,cimd_host=3/60,register=1000/60' },
    }),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all([wide?.stop(), tight?.stop()]);
  await Promise.all([
    https?.close(),
    ent?.close(),
    new Promise((resolve) => (broken ? broken.close(resolve) : resolve(undefined))),
  ]);
  await db?.drop();
  await ca?.cleanup();
});

/** Anonymous registration of a private_key_jwt client with this jwks_uri path on the https server. */
async function registerKeyClient(idp: IdpProcess, path: string, grantTypes?: string[]): Promise<string> {
  const res = await fetch(`${idp.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'amplifier',
      redirect_uris: ['http://127.0.0.1/cb'],
      token_endpoint_auth_method: 'private_key_jwt',
      jwks_uri: `https://localhost:${https.port}${path}`,
      ...(grantTypes ? { grant_types: grantTypes } : {}),
    }),
  });
  const body = (await res.json()) as { client_id: string };
  expect(res.status, JSON.stringify(body)).toBe(201);
  return body.client_id;
}

/** A client assertion for `clientId`, signed with `key` (the registered one, or any other: junk). */
const assertion = (clientId: string, aud: string, key: PrivateKey, kid = 'legit') =>
  new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(aud)
    .setJti(crypto.randomUUID())
    .setIssuedAt()
    .setExpirationTime('2m')
    .sign(key);

const tokenRequest = (idp: IdpProcess, clientAssertion: string) =>
  postForm(`${idp.issuer}/oauth/token`, {
    grant_type: 'refresh_token',
    refresh_token: 'not-a-refresh-token',
    client_assertion_type: JWT_BEARER_CLIENT,
    client_assertion: clientAssertion,
  });

describe('one outbound-fetch budget', () => {
  it(`the attack: a jwks_uri answering not a key set (no-store), ${REQUESTS} junk assertions → one fetch`, async () => {
    const clientId = await registerKeyClient(wide, '/junk-jwks');
    const junkKey = (await generateKeyPair('ES256')).privateKey;
    const statuses = new Set<string>();
    for (let i = 0; i < REQUESTS; i++) {
      const r = await tokenRequest(wide, await assertion(clientId, wide.issuer, junkKey, 'junk'));
      statuses.add(`${r.status} ${r.json.error}`);
    }
    expect([...statuses]).toEqual(['401 invalid_client']);
    expect(count('/junk-jwks')).toBe(1);
  });

  it('control: a key set answered no-store is reused for the cool-down, and its client authenticates every time', async () => {
    const clientId = await registerKeyClient(wide, '/nostore-jwks');
    const before = count('/nostore-jwks');
    for (let i = 0; i < 20; i++) {
      const r = await tokenRequest(wide, await assertion(clientId, wide.issuer, legit.privateKey));
      // Authenticated: the grant itself is what is refused.
      expect({ status: r.status, error: r.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    }
    expect(count('/nostore-jwks') - before).toBe(1);
    // A real sign-in: the authorization-code grant of this private_key_jwt client works.
    const code = await authorizeRequest({
      issuer: wide.issuer,
      sessionToken: alice.sessionToken,
      consent: 'approve',
      params: { client_id: clientId, redirect_uri: 'http://127.0.0.1/cb', scope: 'openid mcp:platform' },
    });
    expect(code.status, code.body.slice(0, 300)).toBe(302);
    const token = await postForm(`${wide.issuer}/oauth/token`, {
      grant_type: 'authorization_code',
      code: code.location!.searchParams.get('code')!,
      code_verifier: code.verifier,
      redirect_uri: 'http://127.0.0.1/cb',
      client_assertion_type: JWT_BEARER_CLIENT,
      client_assertion: await assertion(clientId, wide.issuer, legit.privateKey),
    });
    expect(token.status, token.text).toBe(200);
    expect(count('/nostore-jwks') - before).toBe(1);
  });

  it(`a trusted issuer whose key set fails: ${REQUESTS} ID-JAGs → one fetch of it`, async () => {
    const reg = await fetch(`${wide.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://127.0.0.1/cb'],
        token_endpoint_auth_method: 'client_secret_post',
        grant_types: ['authorization_code', GRANT],
      }),
    });
    const client = (await reg.json()) as { client_id: string; client_secret: string };
    const statuses = new Set<string>();
    for (let i = 0; i < REQUESTS; i++) {
      const r = await postForm(`${wide.issuer}/oauth/token`, {
        grant_type: GRANT,
        client_id: client.client_id,
        client_secret: client.client_secret,
        assertion: await ent.sign({
          email: alice.email,
          aud: wide.issuer,
          client_id: client.client_id,
          resource: `${wide.issuer}`,
        }),
      });
      statuses.add(`${r.status} ${r.json.error}`);
    }
    expect([...statuses]).toEqual(['400 invalid_grant']);
    expect(brokenAsked).toBe(1);
  });

  it('one per-host budget: key sets and metadata documents from one host share it (cimd_host=3/60)', async () => {
    const junkKey = (await generateKeyPair('ES256')).privateKey;
    const answers: number[] = [];
    // Distinct URLs (no cool-down applies): each is a fetch, counted against the host.
    for (let i = 0; i < 4; i++) {
      const clientId = await registerKeyClient(tight, `/junk-jwks?tight=${i}`);
      const r = await tokenRequest(tight, await assertion(clientId, tight.issuer, junkKey, 'junk'));
      answers.push(r.status);
      if (r.status === 429) expect(Number(r.res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    expect(answers).toEqual([401, 401, 401, 429]);
    expect(count('/junk-jwks?tight=')).toBe(3);
    // The metadata documents of that host are over the same budget: not fetched.
    const doc = await authorizeRequest({
      issuer: tight.issuer,
      params: {
        client_id: `https://localhost:${https.port}/doc-tight.json`,
        redirect_uri: `https://localhost:${https.port}/cb`,
      },
    });
    expect(doc.status).toBe(429);
    expect(count('/doc-tight')).toBe(0);
  });
});

describe("a connection's upstream metadata goes through the same budget", () => {
  let upstreamDown: Server;
  let metadataAsked = 0;
  let idp: IdpProcess;
  const file = join(tmpdir(), `connections-outbound-${crypto.randomUUID()}.yaml`);

  beforeAll(async () => {
    upstreamDown = createServer((_req, res) => {
      metadataAsked++;
      res.writeHead(500).end('down');
    });
    await new Promise<void>((resolve) => upstreamDown.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(upstreamDown.address() as { port: number }).port}`;
    await writeFile(
      file,
      `connections:\n  - name: acme\n    kind: oauth\n    issuer: ${issuer}\n    client_id: platform\n    scopes: [repo]\n`,
    );
    idp = await startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: {
        PLATFORM_CONNECTIONS_FILE: file,
        PLATFORM_CONNECTIONS_KEY: 'outbound-test-connections-key-0123456789abcdef',
        PLATFORM_RATE_LIMITS: 'cimd=1000/60,cimd_host=1000/60',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await idp?.stop();
    await new Promise((resolve) => (upstreamDown ? upstreamDown.close(resolve) : resolve(undefined)));
  });

  it(`${REQUESTS / 6} connect attempts while the upstream's metadata fails → one discovery (its two URLs, once)`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i < REQUESTS / 6; i++) {
      const res = await fetch(`${idp.issuer}/connections/acme`, {
        headers: { cookie: `authjs.session-token=${alice.sessionToken}` },
        redirect: 'manual',
      });
      await res.body?.cancel();
      statuses.push(res.status);
    }
    // Each attempt is refused with the page saying the upstream cannot be reached; nothing is connected.
    expect(new Set(statuses)).toEqual(new Set([502]));
    // RFC 8414's URL and OpenID discovery's, tried once; the failure is answered again for the cool-down.
    expect(metadataAsked).toBe(2);
  });
});
