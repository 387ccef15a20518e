// The whole provider through a relying-party library nobody here wrote (openid-client), against a running
// `platform idp` process, with the access token checked by jose against the published key set.

import { Redis } from 'ioredis';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';

let db: TestDatabase;
let idp: IdpProcess;
let user: SeededUser;

beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  user = await seedUser(db.pool, { email: 'Alice.Example@Contoso.COM' });
});

afterAll(async () => {
  await idp?.stop();
  await db?.drop();
});

describe('openid-client against platform idp', () => {
  it('discovers, authorizes with the web session, exchanges with PKCE, refreshes and revokes', async () => {
    const config = await client.discovery(new URL(idp.issuer), 'platform-cli', undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    expect(config.serverMetadata().issuer).toBe(idp.issuer);

    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const redirectUri = 'http://127.0.0.1:45123/callback';
    const authUrl = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'openid email profile mcp:platform mcp:deals',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });

    // The browser part: the web application's session cookie is all the provider needs.
    const res = await fetch(authUrl, {
      redirect: 'manual',
      headers: { cookie: `authjs.session-token=${user.sessionToken}` },
    });
    expect(res.status).toBe(302);
    const callback = new URL(res.headers.get('location')!);
    expect(callback.origin + callback.pathname).toBe(redirectUri);
    expect(callback.searchParams.get('iss')).toBe(idp.issuer);

    const tokens = await client.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: verifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.expires_in).toBe(3600);
    expect(tokens.scope).toBe('openid profile email mcp:platform mcp:deals');
    const idClaims = tokens.claims()!;
    expect(idClaims.sub).toBe(user.sub);
    expect(idClaims.aud).toBe('platform-cli');
    expect(idClaims.nonce).toBe(nonce);

    const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await jwtVerify(tokens.access_token, jwks, {
      issuer: idp.issuer,
      audience: idp.audience,
      algorithms: ['RS256'],
      typ: 'at+jwt',
    });
    expect(protectedHeader.kid).toBeTruthy();
    expect(Object.keys(payload).sort()).toEqual(
      ['aud', 'azp', 'client_id', 'email', 'exp', 'iat', 'iss', 'jti', 'scope', 'sub'].sort(),
    );
    expect(payload).toMatchObject({
      iss: idp.issuer,
      sub: user.sub,
      email: 'alice.example@contoso.com',
      aud: idp.audience,
      scope: 'openid profile email mcp:platform mcp:deals',
      azp: 'platform-cli',
    });
    expect(payload.jti).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(payload.exp! - payload.iat!).toBe(3600);

    const info = await client.fetchUserInfo(config, tokens.access_token, user.sub);
    expect(info).toMatchObject({ sub: user.sub, email: 'alice.example@contoso.com' });

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const again = await jwtVerify(refreshed.access_token, jwks, {
      issuer: idp.issuer,
      audience: idp.audience,
    });
    expect(again.payload.jti).not.toBe(payload.jti);
    expect(decodeProtectedHeader(refreshed.access_token).alg).toBe('RS256');

    // Revoking the refresh token ends the grant; revoking the access token puts its jti on the denylist.
    await client.tokenRevocation(config, refreshed.refresh_token!);
    await expect(client.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({
      error: 'invalid_grant',
    });

    await client.tokenRevocation(config, refreshed.access_token, { token_type_hint: 'access_token' });
    const redis = new Redis(inject('redisUrl'));
    try {
      expect(await redis.get(`platform:deny:jti:${again.payload.jti}`)).toBe('1');
      const ttl = await redis.ttl(`platform:deny:jti:${again.payload.jti}`);
      expect(ttl).toBeGreaterThan(3500);
      expect(ttl).toBeLessThanOrEqual(3600);
    } finally {
      redis.disconnect();
    }
  });

  it('serves identical metadata at both well-known paths with every member the contract names', async () => {
    const a = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    const b = await (await fetch(`${idp.issuer}/.well-known/oauth-authorization-server`)).json();
    expect(b).toEqual(a);
    for (const m of [
      'issuer',
      'authorization_endpoint',
      'token_endpoint',
      'jwks_uri',
      'registration_endpoint',
      'revocation_endpoint',
      'userinfo_endpoint',
      'grant_types_supported',
      'response_types_supported',
      'subject_types_supported',
      'id_token_signing_alg_values_supported',
      'token_endpoint_auth_methods_supported',
      'scopes_supported',
      'claims_supported',
      'code_challenge_methods_supported',
    ]) {
      expect(a, m).toHaveProperty(m);
    }
    expect(a.authorization_response_iss_parameter_supported).toBe(true);
    expect(a.code_challenge_methods_supported).toEqual(['S256']);
    expect(a.response_types_supported).toEqual(['code']);
    expect(a.subject_types_supported).toEqual(['public']);
    expect(a.id_token_signing_alg_values_supported).toEqual(['RS256']);
    expect(a.token_endpoint_auth_methods_supported).toContain('none');
    expect(a.scopes_supported).toEqual([
      'openid',
      'profile',
      'email',
      'offline_access',
      'mcp:platform',
      'mcp:mail',
      'mcp:deals',
      'mcp:calendar',
      'mcp:crm',
      'platform:admin',
      'mail:send_as',
    ]);
  });
});
