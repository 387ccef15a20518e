// Metadata-document clients as the red team used them (issue 17), against real `platform idp` processes and a
// real https document server on localhost:
// - an open redirector: `client_id=https://attacker/doc.json&redirect_uri=https://attacker/cb&response_type=token`
//   with no session answered 302 to the attacker. Now every error for a client the user has not approved is a
//   400 page on the IdP, until the user has seen the consent page.
// - unbounded fetching: 150 anonymous authorize requests with distinct document URLs made 52 fetches and 52
//   client rows. Now fetches are limited per client address (`cimd`) and per host (`cimd_host`), and no row is
//   written before a user approves.
// - errors that tell how names resolve ("vm resolves to 127.0.0.1"). Now: "the metadata document's host is not
//   allowed"; the detail goes to the log.
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type DocumentServer, startDocumentServer } from '../helpers/metadata-documents.ts';
import {
  answerConsent,
  authorizeRequest,
  exchangeCode,
  pkcePair,
  postForm,
  refresh,
  signIn,
} from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { createTestCa, type TestCa } from '../helpers/tls.ts';

let db: TestDatabase;
let ca: TestCa;
let docs: DocumentServer;
let named: IdpProcess; // the document host named exactly, default limits
let limited: IdpProcess; // the same, with small limits and 127.0.0.1 as a trusted proxy
let open: IdpProcess; // PLATFORM_CIMD_ALLOWED_HOSTS unset: localhost is refused (loopback)
let alice: SeededUser;
let bob: SeededUser;

const LIMITS = { perAddress: 20, perHost: 40 };
const randomIp = () => `198.${randomInt(0, 256)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;

beforeAll(async () => {
  [db, ca] = await Promise.all([createTestDatabase(), createTestCa()]);
  docs = await startDocumentServer(ca);
  [alice, bob] = await Promise.all([seedUser(db.pool), seedUser(db.pool)]);
  const redisUrl = inject('redisUrl');
  const cimd = { PLATFORM_CIMD_ALLOWED_HOSTS: `localhost:${docs.port}`, PLATFORM_CIMD_CA_FILE: ca.caFile };
  [named, limited, open] = await Promise.all([
    startIdpProcess({ databaseUrl: db.url, redisUrl, env: { ...cimd, PLATFORM_ADMIN_EMAILS: alice.email } }),
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl,
      env: {
        ...cimd,
        PLATFORM_RATE_LIMITS: `cimd=${LIMITS.perAddress}/60,cimd_host=${LIMITS.perHost}/60`,
        PLATFORM_TRUSTED_PROXIES: '127.0.0.1',
      },
    }),
    startIdpProcess({ databaseUrl: db.url, redisUrl }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([named?.stop(), limited?.stop(), open?.stop()]);
  await docs?.close();
  await db?.drop();
  await ca?.cleanup();
});

const metadataRows = async () =>
  Number(
    (await db.pool.query(`SELECT count(*) AS n FROM platform.oauth_clients WHERE type = 'metadata'`)).rows[0]
      .n,
  );

/** An authorization request for a document client; `params` override the defaults (a valid code request). */
const ask = (
  idp: IdpProcess,
  name: string,
  o: { user?: SeededUser; params?: Record<string, string>; consent?: 'approve' | 'deny' } = {},
) =>
  authorizeRequest({
    issuer: idp.issuer,
    sessionToken: o.user?.sessionToken,
    consent: o.consent,
    params: { client_id: docs.clientId(name), redirect_uri: docs.callback, ...o.params },
  });

/** A refused request shown on the IdP: 400 (or the given status), an HTML page, no Location. */
function expectPage(r: Awaited<ReturnType<typeof ask>>, text: RegExp, status = 400) {
  expect(r.status, r.body.slice(0, 300)).toBe(status);
  expect(r.location).toBeUndefined();
  expect(r.res.headers.get('content-type')).toMatch(/^text\/html/);
  expect(r.body).toMatch(text);
}

describe('no redirect to a metadata-document client nobody approved', () => {
  it('the attack: no session, response_type=token → a 400 page on the IdP, not a 302 to the attacker', async () => {
    const r = await ask(named, 'attack', { params: { response_type: 'token' } });
    expectPage(r, /unsupported_response_type/);
  });

  it('no session: every other error is a page too; a valid request still goes to the sign-in page', async () => {
    expectPage(await ask(named, 'nosession', { params: { prompt: 'none' } }), /login_required/);
    expectPage(
      await ask(named, 'nosession', { params: { code_challenge_method: 'plain' } }),
      /invalid_request/,
    );
    const login = await ask(named, 'nosession');
    expect(login.status).toBe(302);
    expect(login.location!.origin).toBe(new URL(named.issuer).origin);
    expect(login.location!.pathname).toBe('/api/auth/signin');
  });

  it('a signed-in user who never approved it: errors are pages, consent_required too', async () => {
    expectPage(
      await ask(named, 'unapproved', { user: alice, params: { response_type: 'token' } }),
      /unsupported/,
    );
    expectPage(
      await ask(named, 'unapproved', { user: alice, params: { prompt: 'none' } }),
      /consent_required/,
    );
    const page = await ask(named, 'unapproved', { user: alice });
    expect([page.status, page.consentShown]).toEqual([200, true]);
  });

  it('deny on the consent page goes back as access_denied (the user saw the page); errors stay pages', async () => {
    const denied = await ask(named, 'denied', { user: alice, consent: 'deny' });
    expect(denied.status).toBe(302);
    expect(denied.location!.href.startsWith(docs.callback)).toBe(true);
    expect(denied.location!.searchParams.get('error')).toBe('access_denied');
    // Denying stores nothing: the client is still not approved.
    expectPage(
      await ask(named, 'denied', { user: alice, params: { response_type: 'token' } }),
      /unsupported/,
    );
  });

  it('after approval: a row, errors redirect for that user only, and the token endpoint and refresh work', async () => {
    const before = await metadataRows();
    const approved = await ask(named, 'approved', { user: alice, consent: 'approve' });
    const code = approved.location?.searchParams.get('code');
    expect(code, approved.body).toBeTruthy();
    expect(await metadataRows()).toBe(before + 1);

    const err = await ask(named, 'approved', { user: alice, params: { response_type: 'token' } });
    expect(err.status).toBe(302);
    expect(err.location!.searchParams.get('error')).toBe('unsupported_response_type');
    // Another user has not approved it.
    expectPage(
      await ask(named, 'approved', { user: bob, params: { response_type: 'token' } }),
      /unsupported/,
    );

    const tokens = await exchangeCode(named.issuer, {
      code: code!,
      verifier: approved.verifier,
      redirectUri: docs.callback,
      clientId: docs.clientId('approved'),
    });
    expect(tokens.status, tokens.text).toBe(200);
    const next = await refresh(named.issuer, tokens.json.refresh_token as string, docs.clientId('approved'));
    expect(next.status, next.text).toBe(200);

    const row = await db.pool.query(`SELECT type, name FROM platform.oauth_clients WHERE client_id = $1`, [
      docs.clientId('approved'),
    ]);
    expect(row.rows).toEqual([{ type: 'metadata', name: 'Document Client' }]);
    // Administration lists it (kind metadata, one consent); documents only fetched are not listed.
    const admin = await signIn(named.issuer, alice.sessionToken, { scope: 'openid platform:admin' });
    const res = await fetch(`${named.issuer}/admin/api/clients`, {
      headers: { authorization: `Bearer ${admin.access_token}` },
    });
    const { items } = (await res.json()) as { items: Array<Record<string, unknown>> };
    expect(items.find((i) => i.client_id === docs.clientId('approved'))).toMatchObject({
      kind: 'metadata',
      client_name: 'Document Client',
      consents: 1,
    });
    expect(items.filter((i) => i.kind === 'metadata').map((i) => i.client_id)).toEqual([
      docs.clientId('approved'),
    ]);
  });

  it('a forged consent form (no valid CSRF token) still gets a page, never a redirect', async () => {
    const page = await ask(named, 'forged', { user: bob });
    const forged = await answerConsent({
      url: `${named.issuer}/oauth/authorize`,
      html: page.body,
      sessionToken: bob.sessionToken,
      cookieName: 'authjs.session-token',
      decision: 'deny',
      override: { csrf_token: 'forged' },
    });
    expect(forged.status).toBe(403);
    expect(forged.location).toBeUndefined();
  });
});

describe('bounded fetching, no lasting record', () => {
  /** Documents fetched before the bursts (by the tests above, through another provider). */
  let before = 0;
  const anonymous = (clientId: string, xff: string) => {
    const u = new URL(`${limited.issuer}/oauth/authorize`);
    for (const [k, v] of Object.entries({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: docs.callback,
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
    }))
      u.searchParams.set(k, v);
    return fetch(u, { redirect: 'manual', headers: { 'x-forwarded-for': xff } });
  };

  it('the attack: 150 anonymous requests in a burst, distinct documents, one address → at most the limit fetched, 0 rows', async () => {
    const rows = await metadataRows();
    before = docs.requests();
    const ip = randomIp();
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, i) => anonymous(docs.clientId(`burst-${i}`), ip)),
    );
    const statuses = answers.map((r) => r.status);
    expect(docs.requests() - before).toBeLessThanOrEqual(LIMITS.perAddress);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(150 - LIMITS.perAddress);
    // The others went to the sign-in page (our own origin); none to the documents' host.
    for (const r of answers) {
      if (r.status === 429) {
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(r.headers.get('content-type')).toMatch(/^text\/html/);
        expect(await r.text()).toContain(
          'too many client metadata documents or key sets were fetched for this address',
        );
      } else {
        expect(r.status).toBe(302);
        expect(new URL(r.headers.get('location')!).origin).toBe(new URL(limited.issuer).origin);
      }
    }
    expect(await metadataRows()).toBe(rows);
  });

  it('per host: the same burst from 150 different addresses is bounded by the host limit', async () => {
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, i) => anonymous(docs.clientId(`hosts-${i}`), randomIp())),
    );
    // Both bursts together (same host) fetched no more than the host limit.
    expect(docs.requests() - before).toBeLessThanOrEqual(LIMITS.perHost);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(150 - LIMITS.perHost);
    expect(await refused[0]!.text()).toContain('fetched from this host');
    // The device endpoint answers JSON in the documented shape.
    const device = await postForm(`${limited.issuer}/oauth/device_authorization`, {
      client_id: docs.clientId('device-over-limit'),
    });
    expect(device.status).toBe(429);
    expect(device.json.error).toBe('temporarily_unavailable');
    expect(Number(device.res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('the token endpoint never fetches: an unapproved document client holds no grant (invalid_grant)', async () => {
    const fetched = docs.requests();
    const r = await postForm(`${named.issuer}/oauth/token`, {
      grant_type: 'authorization_code',
      client_id: docs.clientId('token-only'),
      code: 'x'.repeat(43),
      code_verifier: pkcePair().verifier,
      redirect_uri: docs.callback,
    });
    expect([r.status, r.json.error]).toEqual([400, 'invalid_grant']);
    const bad = await postForm(`${named.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      client_id: 'https://localhost/../x.json',
      refresh_token: 'x',
    });
    expect([bad.status, bad.json.error]).toEqual([401, 'invalid_client']);
    expect(docs.requests()).toBe(fetched);
  });
});

describe('errors do not tell how host names resolve', () => {
  it('a host resolving to a loopback address: "the metadata document\'s host is not allowed", nothing more', async () => {
    const r = await ask(open, 'resolves', { user: alice });
    expectPage(r, /the metadata document(&#39;|')s host is not allowed/);
    expect(r.body).not.toMatch(/127\.0\.0\.1|::1|resolves|non-public/);
    const device = await postForm(`${open.issuer}/oauth/device_authorization`, {
      client_id: docs.clientId('resolves'),
    });
    expect([device.status, device.json.error]).toEqual([401, 'invalid_client']);
    expect(device.json.error_description).toBe("the metadata document's host is not allowed");
    // The detail is in the log.
    await open.waitFor(
      /"detail":"localhost resolves to (127\.0\.0\.1|::1)[^"]*","msg":"client metadata document host refused"/,
    );
  });
});
