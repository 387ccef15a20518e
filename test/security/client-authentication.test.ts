// Confidential clients (issue 18): the attacks on client authentication, replayed against a real IdP. Each
// must fail with 401 {"error":"invalid_client","error_description":…} (a client that gets it registers again:
// https://support.anthropic.com/en/articles/11503834-building-custom-connectors-via-remote-mcp-servers).
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ASSERTION_TYPE, basicAuth, clientAssertion, registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { obtainCode, postForm } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

const CB = 'http://127.0.0.1:9/cb';
let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;
const keys = await generateKeyPair('ES256', { extractable: true });
const attacker = await generateKeyPair('ES256', { extractable: true });
let secretClient: { id: string; secret: string };
let otherClient: { id: string; secret: string };
let jwtClient: string;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  user = await seedUser(db.pool);
  const reg = async (m: Record<string, unknown>) =>
    (await registerClient(idp.url, { redirect_uris: [CB], ...m })).json;
  const a = await reg({ token_endpoint_auth_method: 'client_secret_post' });
  secretClient = { id: a.client_id, secret: a.client_secret as string };
  const b = await reg({ token_endpoint_auth_method: 'client_secret_basic' });
  otherClient = { id: b.client_id, secret: b.client_secret as string };
  const jwk = { ...(await exportJWK(keys.publicKey)), alg: 'ES256' };
  jwtClient = (await reg({ token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [jwk] } })).client_id;
}, 60_000);

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

const tokenUrl = () => `${idp.url}/oauth/token`;

async function stolenCode(clientId: string) {
  const c = await obtainCode({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { client_id: clientId, redirect_uri: CB, scope: 'openid mcp:platform' },
  });
  return { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: CB };
}

function expectInvalidClient(r: { status: number; json: Record<string, unknown> }) {
  expect(r.status).toBe(401);
  expect(r.json.error).toBe('invalid_client');
  expect(typeof r.json.error_description).toBe('string');
  expect(r.json.access_token).toBeUndefined();
}

describe('client secrets', () => {
  it('a stolen code (and verifier) of a confidential client is refused without its secret', async () => {
    expectInvalidClient(
      await postForm(tokenUrl(), { ...(await stolenCode(secretClient.id)), client_id: secretClient.id }),
    );
  });

  it('a wrong secret, in the body or in Basic, is refused', async () => {
    const code = await stolenCode(secretClient.id);
    expectInvalidClient(
      await postForm(tokenUrl(), { ...code, client_id: secretClient.id, client_secret: 'guess' }),
    );
    const res = await fetch(tokenUrl(), {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basicAuth(secretClient.id, `${secretClient.secret}x`),
      },
      body: new URLSearchParams(await stolenCode(secretClient.id)),
    });
    expectInvalidClient({ status: res.status, json: (await res.json()) as Record<string, unknown> });
  });

  it("another client's secret does not authenticate this client", async () => {
    const code = await stolenCode(secretClient.id);
    expectInvalidClient(
      await postForm(tokenUrl(), { ...code, client_id: secretClient.id, client_secret: otherClient.secret }),
    );
  });

  it('a confidential client cannot be downgraded to public at revocation or the device endpoint', async () => {
    expectInvalidClient(
      await postForm(`${idp.url}/oauth/revoke`, { token: 'x', client_id: secretClient.id }),
    );
    expectInvalidClient(
      await postForm(`${idp.url}/oauth/device_authorization`, { client_id: otherClient.id }),
    );
  });

  it('the secret is stored only hashed', async () => {
    const { rows } = await db.pool.query('SELECT * FROM platform.oauth_clients WHERE client_id = $1', [
      secretClient.id,
    ]);
    expect(JSON.stringify(rows)).not.toContain(secretClient.secret);
  });
});

describe('private_key_jwt', () => {
  const aud = () => idp.issuer;
  it('an assertion signed by another key is refused', async () => {
    const assertion = await clientAssertion(attacker.privateKey, { clientId: jwtClient, aud: aud() });
    expectInvalidClient(
      await postForm(tokenUrl(), {
        ...(await stolenCode(jwtClient)),
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: assertion,
      }),
    );
  });

  it('a replayed assertion (same jti) is refused the second time', async () => {
    const assertion = await clientAssertion(keys.privateKey, { clientId: jwtClient, aud: aud() });
    const first = await postForm(tokenUrl(), {
      ...(await stolenCode(jwtClient)),
      client_assertion_type: ASSERTION_TYPE,
      client_assertion: assertion,
    });
    expect(first.status, first.text).toBe(200);
    expectInvalidClient(
      await postForm(tokenUrl(), {
        ...(await stolenCode(jwtClient)),
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: assertion,
      }),
    );
  });

  const bad: Array<[string, Record<string, unknown>, string?]> = [
    ['for another audience', { aud: 'https://other.example/token' }],
    ['with iss other than sub', { iss: 'someone-else' }],
    ['expired', { exp: Math.floor(Date.now() / 1000) - 600 }],
    ['living longer than an hour', { exp: Math.floor(Date.now() / 1000) + 7200 }],
    ['without jti', { jti: undefined }],
  ];
  for (const [name, claims] of bad) {
    it(`an assertion ${name} is refused`, async () => {
      const assertion = await clientAssertion(keys.privateKey, { clientId: jwtClient, aud: aud(), claims });
      expectInvalidClient(
        await postForm(tokenUrl(), {
          ...(await stolenCode(jwtClient)),
          client_assertion_type: ASSERTION_TYPE,
          client_assertion: assertion,
        }),
      );
    });
  }

  it('a private_key_jwt client cannot use a code without an assertion', async () => {
    expectInvalidClient(
      await postForm(tokenUrl(), { ...(await stolenCode(jwtClient)), client_id: jwtClient }),
    );
  });
});
