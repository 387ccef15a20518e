// OpenID Connect checks mirrored from the OpenID Foundation's conformance suite (openid-certification/
// conformance-suite, src/main/java/net/openid/conformance/openid/): the oidcc-config plan and the oidcc-basic
// modules that apply to a public client with PKCE (client authentication `none`). One describe per module, named as
// the module's testName; one `it` per condition the module calls, named as the condition class.
// Everything goes through oauth4webapi (a certified, strict relying-party library) against a real `platform idp`
// served over https; the browser step (session cookie, sign-in page, consent) is test/helpers/https-issuer.ts.
// Where the suite waits (WaitFor2Seconds before max_age=1), the test moves the recorded sign-in back in the
// database instead; where it waits one second so that two iat differ, the test waits for the next second.
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sessionHash } from '../../idp/store/sessions.ts';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, seedUser, type TestDatabase } from '../helpers/database.ts';
import { Browser, type BrowserOutcome, type HttpsIssuer, startHttpsIssuer } from '../helpers/https-issuer.ts';

const REDIRECT = 'http://127.0.0.1:53682/oidc-callback';
const SCOPE = 'openid email';

let db: TestDatabase;
let https: HttpsIssuer;
let as: oauth.AuthorizationServer;
let discovery: { status: number; contentType: string | null; body: Record<string, unknown> };
let client: oauth.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  https = await startHttpsIssuer({ databaseUrl: db.url, redisUrl: inject('redisUrl') });
  const issuer = new URL(https.issuer);
  const res = await oauth.discoveryRequest(issuer, { algorithm: 'oidc' });
  discovery = {
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: (await res.clone().json()) as Record<string, unknown>,
  };
  as = await oauth.processDiscoveryResponse(issuer, res);
  client = await registerPublicClient('OIDC conformance client');
}, 60_000);

afterAll(async () => {
  await https?.close();
  await db?.drop();
});

/** A public client (token_endpoint_auth_method none) registered through the registration endpoint. */
async function registerPublicClient(name: string): Promise<oauth.Client> {
  const r = await registerClient(https.issuer, {
    client_name: name,
    application_type: 'native',
    redirect_uris: [REDIRECT],
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
  });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return { client_id: r.json.client_id, token_endpoint_auth_method: 'none' };
}

/** A new user with a browser that has never been to the provider. */
async function newBrowser(): Promise<Browser> {
  return new Browser(https.issuer, db.pool, await seedUser(db.pool));
}

interface Authorization {
  state: string;
  nonce: string | undefined;
  verifier: string;
  outcome: BrowserOutcome;
}

/** The authorization request (code, PKCE S256, state, nonce), opened in the browser. */
async function authorize(
  browser: Browser,
  params: Record<string, string | undefined> = {},
  c: oauth.Client = client,
  method: 'GET' | 'POST' = 'GET',
): Promise<Authorization> {
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const verifier = oauth.generateRandomCodeVerifier();
  const all: Record<string, string | undefined> = {
    client_id: c.client_id,
    redirect_uri: REDIRECT,
    response_type: 'code',
    scope: SCOPE,
    state,
    nonce,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    ...params,
  };
  const url = new URL(as.authorization_endpoint!);
  for (const [k, v] of Object.entries(all)) if (v !== undefined) url.searchParams.set(k, v);
  return { state: all.state!, nonce: all.nonce, verifier, outcome: await browser.open(url, { method }) };
}

function callbackOf(a: Authorization): URL {
  if (a.outcome.kind !== 'callback')
    throw new Error(`no redirect to the client: ${a.outcome.status} ${a.outcome.body.slice(0, 300)}`);
  return a.outcome.url;
}

interface CodeFlow {
  authorization: Authorization;
  callback: URLSearchParams;
  tokenResponse: Response;
  tokens: oauth.TokenEndpointResponse;
  claims: oauth.IDToken;
}

/** The whole code flow, strictly validated: callback (state, iss), token response, id_token (nonce, max_age). */
async function codeFlow(
  browser: Browser,
  params: Record<string, string | undefined> = {},
  o: { maxAge?: number; c?: oauth.Client; method?: 'GET' | 'POST' } = {},
): Promise<CodeFlow> {
  const c = o.c ?? client;
  const authorization = await authorize(browser, params, c, o.method);
  const callback = oauth.validateAuthResponse(as, c, callbackOf(authorization), authorization.state);
  const tokenResponse = await oauth.authorizationCodeGrantRequest(
    as,
    c,
    oauth.None(),
    callback,
    REDIRECT,
    authorization.verifier,
  );
  const tokens = await oauth.processAuthorizationCodeResponse(as, c, tokenResponse, {
    expectedNonce: authorization.nonce ?? oauth.expectNoNonce,
    requireIdToken: true,
    maxAge: o.maxAge,
  });
  return { authorization, callback, tokenResponse, tokens, claims: oauth.getValidatedIdTokenClaims(tokens)! };
}

/** The user signed in `seconds` ago: the provider's record of the browser's sign-in moved back. */
async function signedInAgo(browser: Browser, seconds: number): Promise<void> {
  const { rowCount } = await db.pool.query(
    `UPDATE platform.web_session_logins SET auth_time = auth_time - $2::int WHERE session_hash = $1`,
    [sessionHash(browser.sessionToken!), seconds],
  );
  expect(rowCount, 'the provider has not seen this session').toBe(1);
}

/** WaitForOneSecond: until the clock is past `iat`, so the next token's iat differs. */
async function nextSecondAfter(iat: number): Promise<void> {
  while (Math.floor(Date.now() / 1000) <= iat) await new Promise((r) => setTimeout(r, 50));
}

const ERROR_CHARS = /^[\x20-\x21\x23-\x5B\x5D-\x7E]*$/; // RFC 6749 §5.2 error and error_description

function decodedHeader(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>;
}

/** The provider's signing keys, as jwks_uri serves them. */
async function serverKeys(): Promise<Array<Record<string, unknown>>> {
  return ((await (await fetch(as.jwks_uri!)).json()) as { keys: Array<Record<string, unknown>> }).keys;
}

/** The error validateAuthResponse raises for the authorization's callback (undefined if it accepts it). */
function authResponseError(a: Authorization): unknown {
  try {
    oauth.validateAuthResponse(as, client, callbackOf(a), a.state);
  } catch (e) {
    return e;
  }
}

/** The authorization ended on the provider's error page, with no redirect. */
function errorPage(a: Authorization): Extract<BrowserOutcome, { kind: 'page' }> {
  expect(a.outcome.kind).toBe('page');
  const page = a.outcome as Extract<BrowserOutcome, { kind: 'page' }>;
  expect(page.status).toBe(400);
  expect(page.headers.get('location')).toBeNull();
  return page;
}

/** The flow's code presented again, as the suite's code reuse modules do. */
function replayCode(flow: CodeFlow): Promise<Response> {
  return oauth.authorizationCodeGrantRequest(
    as,
    client,
    oauth.None(),
    flow.callback,
    REDIRECT,
    flow.authorization.verifier,
  );
}

/** A refresh request from the conformance client. */
function refreshRequest(
  refreshToken: string,
  options?: oauth.TokenEndpointRequestOptions,
): Promise<Response> {
  return oauth.refreshTokenGrantRequest(as, client, oauth.None(), refreshToken, options);
}

/** userinfo with the flow's access token, validated (its sub is the id_token's). */
async function userInfoOf(flow: CodeFlow): Promise<oauth.UserInfoResponse> {
  const res = await oauth.userInfoRequest(as, client, flow.tokens.access_token);
  return oauth.processUserInfoResponse(as, client, flow.claims.sub, res);
}

interface TwoAuthorizations {
  browser: Browser;
  first: CodeFlow;
  second: CodeFlow;
}

/**
 * The suite's second-authorization modules: in one new browser a first code flow, then a second with `params`.
 * `signedInBefore` (seconds) moves the sign-in back and makes the first flow again before the second.
 */
function twoAuthorizations(
  params: (first: CodeFlow) => Record<string, string | undefined>,
  o: { maxAge?: number; signedInBefore?: number } = {},
): TwoAuthorizations {
  const t = {} as TwoAuthorizations;
  beforeAll(async () => {
    t.browser = await newBrowser();
    t.first = await codeFlow(t.browser);
    if (o.signedInBefore !== undefined) {
      await signedInAgo(t.browser, o.signedInBefore);
      t.first = await codeFlow(t.browser);
    }
    t.second = await codeFlow(t.browser, params(t.first), { maxAge: o.maxAge });
  });
  return t;
}

/** The `it` every second-authorization module has. */
function itKeepsTheSubject(t: TwoAuthorizations): void {
  it('CheckIdTokenSubConsistentForSecondAuthorization', () => {
    expect(t.second.claims.sub).toBe(t.first.claims.sub);
  });
}

// ───────────────────────────────────────── oidcc-config plan ─────────────────────────────────────────

describe('oidcc-discovery-endpoint-verification', () => {
  it('GetDynamicServerConfiguration (processDiscoveryResponse accepts the document for the https issuer)', () => {
    expect(as.issuer).toBe(https.issuer);
    expect(https.issuer).toMatch(/^https:\/\/localhost:\d+$/);
  });
  it('EnsureDiscoveryEndpointResponseStatusCodeIs200', () => {
    expect(discovery.status).toBe(200);
  });
  it('CheckDiscoveryEndpointReturnedJsonContentType', () => {
    expect(discovery.contentType).toMatch(/^application\/json\b/);
  });
  it('OIDCCCheckDiscEndpointResponseTypesSupported', () => {
    expect(as.response_types_supported).toContain('code');
  });
  it('CheckDiscEndpointDiscoveryUrl', () => {
    expect(`${as.issuer}/.well-known/openid-configuration`).toBe(
      `${https.issuer}/.well-known/openid-configuration`,
    );
  });
  it('CheckDiscEndpointIssuer', () => {
    expect(discovery.body.issuer).toBe(https.issuer);
  });
  it('CheckDiscEndpointIssuerIsValidUrl', () => {
    const u = new URL(as.issuer);
    expect(u.protocol).toBe('https:');
    expect(u.search + u.hash).toBe('');
  });
  it('CheckDiscEndpointSubjectTypesSupported', () => {
    const types = as.subject_types_supported as string[];
    expect(types.length).toBeGreaterThan(0);
    for (const t of types) expect(['public', 'pairwise']).toContain(t);
  });
  it('OIDCCCheckDiscEndpointIdTokenSigningAlgValuesSupported', () => {
    expect(as.id_token_signing_alg_values_supported).toContain('RS256');
    expect(as.id_token_signing_alg_values_supported).not.toContain('none');
  });
  it('CheckDiscEndpointAuthorizationEndpoint', () => {
    expect(as.authorization_endpoint).toMatch(/^https:\/\//);
  });
  it('CheckDiscEndpointTokenEndpoint', () => {
    expect(as.token_endpoint).toMatch(/^https:\/\//);
  });
  it('CheckDiscEndpointUserinfoEndpoint', () => {
    expect(as.userinfo_endpoint).toMatch(/^https:\/\//);
  });
  it('CheckDiscEndpointRegistrationEndpoint', () => {
    expect(as.registration_endpoint).toMatch(/^https:\/\//);
  });
  it('CheckJwksUri', () => {
    expect(as.jwks_uri).toMatch(/^https:\/\//);
  });
  it('FetchServerKeys, ValidateServerJWKs, CheckForKeyIdInServerJWKs', async () => {
    const res = await fetch(as.jwks_uri!);
    expect(res.status).toBe(200);
    const { keys } = (await res.json()) as { keys: Array<Record<string, unknown>> };
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) {
      expect(k.kty).toBe('RSA');
      expect(typeof k.n).toBe('string');
      expect(typeof k.e).toBe('string');
      expect(typeof k.kid).toBe('string');
    }
    expect(new Set(keys.map((k) => k.kid)).size).toBe(keys.length);
  });
  it('EnsureServerJwksDoesNotContainPrivateOrSymmetricKeys', async () => {
    for (const k of await serverKeys()) {
      expect(k.kty).not.toBe('oct');
      for (const p of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']) expect(k).not.toHaveProperty(p);
    }
  });
  it('CheckDiscEndpointRequestParameterSupported, CheckDiscEndpointRequestUriParameterSupported', () => {
    expect(as.request_parameter_supported).toBe(false);
    expect(as.request_uri_parameter_supported).toBe(false);
  });
  it('CheckDiscEndpointClaimsParameterSupported', () => {
    expect(as.claims_parameter_supported).toBe(false);
  });
  it('OIDCCCheckDiscEndpointClaimsSupported', () => {
    for (const c of ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'email', 'email_verified'])
      expect(as.claims_supported).toContain(c);
  });
  it('OIDCCCheckDiscEndpointGrantTypesSupported', () => {
    expect(as.grant_types_supported).toContain('authorization_code');
  });
  it('CheckDiscEndpointScopesSupportedContainsOpenId', () => {
    expect(as.scopes_supported).toContain('openid');
  });
  it('CheckDiscEndpointScopesSupportedSyntax', () => {
    for (const s of as.scopes_supported!) expect(s).toMatch(/^[\x21\x23-\x5B\x5D-\x7E]+$/);
  });
  it('CheckDiscEndpointAllEndpointsAreHttps', () => {
    const endpoints = Object.entries(discovery.body).filter(
      ([k]) => k.endsWith('_endpoint') || k === 'jwks_uri',
    );
    expect(endpoints.length).toBeGreaterThan(4);
    for (const [k, v] of endpoints) expect(v, k).toMatch(/^https:\/\//);
  });
  it('EnsureServerConfigurationCodeChallengeMethodsSupportedIsAnArray', () => {
    expect(Array.isArray(as.code_challenge_methods_supported)).toBe(true);
    expect(as.code_challenge_methods_supported).toContain('S256');
  });
});

// ───────────────────────────────────────── oidcc-basic plan ─────────────────────────────────────────

describe('oidcc-server', () => {
  let browser: Browser;
  let flow: CodeFlow;
  beforeAll(async () => {
    browser = await newBrowser();
    flow = await codeFlow(browser);
  });

  it('CheckMatchingStateParameter, CheckIfAuthorizationEndpointError (validateAuthResponse: state and RFC 9207 iss)', () => {
    expect(flow.callback.get('code')).toBeTruthy();
    expect(flow.callback.get('error')).toBeNull();
    expect(callbackOf(flow.authorization).searchParams.get('iss')).toBe(https.issuer);
  });
  it('ExtractAuthorizationCodeFromAuthorizationResponse, CallTokenEndpoint (authorization code with PKCE S256)', () => {
    expect(flow.tokenResponse.status).toBe(200);
  });
  it('CheckForAccessTokenValue, CheckTokenTypeIsBearer', () => {
    expect(flow.tokens.access_token).toBeTruthy();
    expect(flow.tokens.token_type).toBe('bearer'); // oauth4webapi lowercases
  });
  it('ExtractExpiresInFromTokenEndpointResponse, ValidateExpiresIn', () => {
    expect(Number.isInteger(flow.tokens.expires_in)).toBe(true);
    expect(flow.tokens.expires_in).toBeGreaterThan(0);
  });
  it('CheckForRefreshTokenValue', () => {
    expect(flow.tokens.refresh_token).toBeTruthy();
  });
  it('ExtractIdTokenFromTokenResponse, ValidateIdToken (iss, aud, exp, iat; processAuthorizationCodeResponse)', () => {
    const now = Math.floor(Date.now() / 1000);
    expect(flow.claims.iss).toBe(https.issuer);
    expect([flow.claims.aud].flat()).toContain(client.client_id);
    expect(flow.claims.exp).toBeGreaterThan(now);
    expect(Math.abs(flow.claims.iat - now)).toBeLessThan(300);
  });
  it('ValidateIdTokenNonce', () => {
    expect(flow.claims.nonce).toBe(flow.authorization.nonce);
  });
  it('ValidateIdTokenSignature, ValidateIdTokenSignatureUsingKid (validateApplicationLevelSignature with the jwks_uri)', async () => {
    await oauth.validateApplicationLevelSignature(as, flow.tokenResponse);
  });
  it('CheckForSubjectInIdToken', () => {
    expect(flow.claims.sub).toBe(browser.user.sub);
  });
  it('CallProtectedResourceWithBearerToken (the userinfo endpoint)', async () => {
    const res = await oauth.userInfoRequest(as, client, flow.tokens.access_token);
    expect(res.status).toBe(200);
  });
});

describe('oidcc-ensure-post-request-succeeds', () => {
  let browser: Browser;
  let flow: CodeFlow;
  let again: Response;
  let againState: string;
  beforeAll(async () => {
    // A browser with no session: the POST sends it to sign in, back by GET with the request, then consent.
    browser = await newBrowser();
    flow = await codeFlow(browser, {}, { method: 'POST' });
    // Signed in and approved now: the POST alone answers with the code.
    againState = oauth.generateRandomState();
    again = await fetch(new URL(as.authorization_endpoint!), {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({
        client_id: client.client_id,
        redirect_uri: REDIRECT,
        response_type: 'code',
        scope: SCOPE,
        state: againState,
        code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
        code_challenge_method: 'S256',
      }),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: `${browser.cookieName}=${browser.sessionToken}`,
      },
    });
  });
  it('ExpectRedirectUriHasBeenCalled (the POSTed request, through sign-in and consent, reaches the redirect_uri)', () => {
    expect(callbackOf(flow.authorization).href.startsWith(`${REDIRECT}?`)).toBe(true);
    expect(flow.callback.get('code')).toBeTruthy();
    expect(browser.signInPages).toHaveLength(1);
    expect(
      new URL(browser.signInPages[0]!.searchParams.get('callbackUrl')!).searchParams.get('client_id'),
    ).toBe(client.client_id);
  });
  it('CheckMatchingStateParameter, CheckIfAuthorizationEndpointError (validateAuthResponse: state and RFC 9207 iss)', () => {
    expect(callbackOf(flow.authorization).searchParams.get('iss')).toBe(https.issuer);
    expect(flow.callback.get('error')).toBeNull();
  });
  it('CallTokenEndpoint, ValidateIdToken, ValidateIdTokenNonce', () => {
    expect(flow.tokenResponse.status).toBe(200);
    expect(flow.claims.sub).toBe(browser.user.sub);
    expect(flow.claims.nonce).toBe(flow.authorization.nonce);
  });
  it('signed in and approved, the POST itself is answered with the redirect and a code', () => {
    expect(again.status).toBe(302);
    const cb = oauth.validateAuthResponse(as, client, new URL(again.headers.get('location')!), againState);
    expect(cb.get('code')).toBeTruthy();
  });
});

describe('oidcc-ensure-request-with-valid-pkce-succeeds', () => {
  it('CallTokenEndpoint, CheckIfTokenEndpointResponseError (S256 verifier accepted)', async () => {
    const flow = await codeFlow(await newBrowser());
    expect(flow.tokens.access_token).toBeTruthy();
  });
});

describe('oidcc-idtoken-signature', () => {
  let flow: CodeFlow;
  beforeAll(async () => {
    flow = await codeFlow(await newBrowser());
  });
  it('EnsureIdTokenContainsKid', async () => {
    const kid = decodedHeader(flow.tokens.id_token!).kid;
    expect((await serverKeys()).map((k) => k.kid)).toContain(kid);
  });
  it('EnsureIdTokenSignatureIsRS256', () => {
    expect(decodedHeader(flow.tokens.id_token!).alg).toBe('RS256');
  });
  it('ValidateIdTokenSignatureUsingKid', async () => {
    await oauth.validateApplicationLevelSignature(as, flow.tokenResponse);
  });
});

describe('oidcc-ensure-request-without-nonce-succeeds-for-code-flow', () => {
  it('CheckIfAuthorizationEndpointError, ValidateIdToken (no nonce asked, none in the id_token)', async () => {
    const flow = await codeFlow(await newBrowser(), { nonce: undefined });
    expect(flow.authorization.nonce).toBeUndefined();
    expect(flow.claims.nonce).toBeUndefined();
  });
});

describe.each([
  ['oidcc-userinfo-get', 'GET'],
  ['oidcc-userinfo-post-header', 'POST'],
])('%s', (_module, method) => {
  let browser: Browser;
  let flow: CodeFlow;
  let res: Response;
  beforeAll(async () => {
    browser = await newBrowser();
    flow = await codeFlow(browser);
    res =
      method === 'GET'
        ? await oauth.userInfoRequest(as, client, flow.tokens.access_token)
        : await oauth.protectedResourceRequest(
            flow.tokens.access_token,
            'POST',
            new URL(as.userinfo_endpoint!),
          );
  });
  it('CallUserInfoEndpointWithBearerToken', () => {
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
  });
  it('ExtractUserInfoFromUserInfoEndpointResponse, EnsureUserInfoContainsSub (processUserInfoResponse: sub is the id_token sub)', async () => {
    const info = await oauth.processUserInfoResponse(as, client, flow.claims.sub, res);
    expect(info.sub).toBe(browser.user.sub);
    expect(info.email).toBe(browser.user.email);
  });
});

describe('oidcc-userinfo-post-body', () => {
  let browser: Browser;
  let flow: CodeFlow;
  let res: Response;
  /** POST to userinfo with a form body (RFC 6750 §2.2), and optionally a header. */
  const postBody = (form: Record<string, string>, headers: Record<string, string> = {}, query = '') =>
    fetch(`${as.userinfo_endpoint!}${query}`, {
      method: 'POST',
      body: new URLSearchParams(form),
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    });
  beforeAll(async () => {
    browser = await newBrowser();
    flow = await codeFlow(browser);
    res = await postBody({ access_token: flow.tokens.access_token });
  });
  it('CallUserInfoEndpointWithBearerTokenInBodyAllowingFailure (supported: 200, no UserInfoEndpointWithAccessTokenInBodyNotSupported)', () => {
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
  });
  it('ExtractUserInfoFromUserInfoEndpointResponse, EnsureUserInfoContainsSub (processUserInfoResponse: sub is the id_token sub)', async () => {
    const info = await oauth.processUserInfoResponse(as, client, flow.claims.sub, res);
    expect(info.sub).toBe(browser.user.sub);
    expect(info.email).toBe(browser.user.email);
  });
  it('RFC 6750 §2: the token in the header and in the body at once → 400 invalid_request', async () => {
    const both = await postBody(
      { access_token: flow.tokens.access_token },
      { authorization: `Bearer ${flow.tokens.access_token}` },
    );
    expect(both.status).toBe(400);
    expect(both.headers.get('www-authenticate')).toBe('Bearer error="invalid_request"');
    expect(await both.json()).toMatchObject({ error: 'invalid_request' });
  });
  it('RFC 6750 §2.3 is not offered: the token in the query → 400 invalid_request, with or without another', async () => {
    const query = `?access_token=${encodeURIComponent(flow.tokens.access_token)}`;
    for (const r of [
      await fetch(`${as.userinfo_endpoint!}${query}`),
      await postBody({}, { authorization: `Bearer ${flow.tokens.access_token}` }, query),
    ]) {
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: string }).error).toBe('invalid_request');
    }
  });
  it('a body that is not a bearer token, or another media type, is no token: 401 invalid_token', async () => {
    const bad = await postBody({ access_token: 'not a token' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toMatch(/^Bearer\b.*error="invalid_token"/);
    const json = await fetch(as.userinfo_endpoint!, {
      method: 'POST',
      body: JSON.stringify({ access_token: flow.tokens.access_token }),
      headers: { 'content-type': 'application/json' },
    });
    expect(json.status).toBe(401);
  });
});

describe('oidcc-codereuse', () => {
  let first: CodeFlow;
  let again: Response;
  beforeAll(async () => {
    first = await codeFlow(await newBrowser());
    again = await replayCode(first);
  });
  it('CheckTokenEndpointHttpStatus400', () => {
    expect(again.status).toBe(400);
  });
  it('CheckTokenEndpointReturnedJsonContentType', () => {
    expect(again.headers.get('content-type')).toMatch(/^application\/json\b/);
  });
  it('CheckErrorFromTokenEndpointResponseErrorInvalidGrant (processAuthorizationCodeResponse refuses)', async () => {
    const err = await oauth
      .processAuthorizationCodeResponse(as, client, again.clone(), {
        expectedNonce: first.authorization.nonce,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(oauth.ResponseBodyError);
    expect((err as oauth.ResponseBodyError).error).toBe('invalid_grant');
  });
  it('ValidateErrorFromTokenEndpointResponseError, ValidateErrorDescriptionFromTokenEndpointResponseError', async () => {
    const body = (await again.clone().json()) as Record<string, unknown>;
    expect(body.error).toMatch(ERROR_CHARS);
    expect(typeof body.error_description).toBe('string');
    expect(body.error_description).toMatch(ERROR_CHARS);
    expect(body.error_uri).toBeUndefined();
  });
});

describe('oidcc-codereuse-30seconds', () => {
  // The suite waits 30 s before the replay: the rule does not depend on the delay (a replay is recognised for the
  // code's whole life and a day after), so the replay is made at once.
  it('CheckErrorFromTokenEndpointResponseErrorInvalidGrant, CallProtectedResourceWithBearerTokenExpectingError (RFC 6749 §4.1.2: the replay revokes what the code issued)', async () => {
    const first = await codeFlow(await newBrowser());
    expect((await oauth.userInfoRequest(as, client, first.tokens.access_token)).status).toBe(200);
    const again = await replayCode(first);
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: string }).error).toBe('invalid_grant');
    const after = await oauth.userInfoRequest(as, client, first.tokens.access_token);
    expect(after.status).toBe(401);
    expect(after.headers.get('www-authenticate')).toMatch(/^Bearer\b.*error="invalid_token"/);
    const refreshed = await refreshRequest(first.tokens.refresh_token!);
    expect(refreshed.status).toBe(400);
  });
});

describe('oidcc-ensure-registered-redirect-uri', () => {
  it('ExpectRedirectUriErrorPage (an unregistered redirect_uri: an error page, no redirect)', async () => {
    const page = errorPage(
      await authorize(await newBrowser(), {
        redirect_uri: `https://unregistered.example/${oauth.generateRandomState()}`,
      }),
    );
    expect(page.headers.get('content-type')).toMatch(/^text\/html\b/);
    expect(page.body).toContain('redirect_uri');
  });
});

describe('oidcc-ensure-redirect-uri-in-authorization-request', () => {
  it('ExpectRedirectUriMissingErrorPage (no redirect_uri: an error page, no redirect)', async () => {
    const page = errorPage(await authorize(await newBrowser(), { redirect_uri: undefined }));
    expect(page.body).toContain('redirect_uri is missing');
  });
});

describe('oidcc-prompt-none-not-logged-in', () => {
  let a: Authorization;
  beforeAll(async () => {
    // the suite's requested_state_length 128: the state must come back uncorrupted
    a = await authorize(await newBrowser(), {
      prompt: 'none',
      state: oauth.generateRandomState().repeat(3).slice(0, 128),
    });
  });
  it('CheckStateInAuthorizationResponse, ValidateErrorResponseFromAuthorizationEndpoint', () => {
    const cb = callbackOf(a);
    expect(cb.searchParams.get('state')).toBe(a.state);
    expect(a.state).toHaveLength(128);
    expect(cb.searchParams.get('error')).toMatch(ERROR_CHARS);
    expect(cb.searchParams.get('code')).toBeNull();
  });
  it('CheckErrorFromAuthorizationEndpointIsOneThatRequiredAUserInterface (validateAuthResponse raises it)', () => {
    const err = authResponseError(a);
    expect(err).toBeInstanceOf(oauth.AuthorizationResponseError);
    expect([
      'login_required',
      'interaction_required',
      'consent_required',
      'account_selection_required',
    ]).toContain((err as oauth.AuthorizationResponseError).error);
  });
});

describe('oidcc-prompt-none-logged-in', () => {
  const t = twoAuthorizations(() => ({ prompt: 'none' }));
  it('CheckIdTokenAuthTimeClaimsSameIfPresent', () => {
    expect(t.first.claims.auth_time).toBeTypeOf('number');
    expect(t.second.claims.auth_time).toBe(t.first.claims.auth_time);
  });
  itKeepsTheSubject(t);
  it('the second authorization did not ask the user to sign in', () => {
    expect(t.browser.signInPages).toHaveLength(1);
  });
});

describe('oidcc-prompt-login', () => {
  // the user signed in a minute before the first authorization's id_token (the suite's user takes seconds)
  const t = twoAuthorizations(() => ({ prompt: 'login' }), { signedInBefore: 60 });
  it('ExpectSecondLoginPage (prompt=login sends the signed-in browser to the sign-in page again)', () => {
    expect(t.browser.signInPages).toHaveLength(2);
    const again = t.browser.signInPages[1]!;
    expect(`${again.origin}${again.pathname}`).toBe(`${https.issuer}/api/auth/signin`);
    expect(new URL(again.searchParams.get('callbackUrl')!).searchParams.get('prompt')).toBe('login');
  });
  it('CheckIdTokenAuthTimeClaimsDifferIfPresent', () => {
    expect(t.second.claims.auth_time).toBeTypeOf('number');
    expect(t.second.claims.auth_time).not.toBe(t.first.claims.auth_time);
    expect(t.second.claims.auth_time!).toBeGreaterThan(t.first.claims.auth_time!);
  });
  itKeepsTheSubject(t);
});

describe('oidcc-max-age-1', () => {
  const t = twoAuthorizations(() => ({ max_age: '1' }), { maxAge: 1, signedInBefore: 2 }); // WaitFor2Seconds
  it('ExpectSecondLoginPage', () => {
    expect(t.browser.signInPages).toHaveLength(2);
  });
  it('CheckIdTokenAuthTimeClaimPresentDueToMaxAge', () => {
    expect(t.second.claims.auth_time).toBeTypeOf('number');
  });
  it('CheckSecondIdTokenAuthTimeIsLaterIfPresent', () => {
    expect(t.second.claims.auth_time!).toBeGreaterThan(t.first.claims.auth_time!);
  });
  it('CheckIdTokenAuthTimeIsRecentIfPresent (processAuthorizationCodeResponse with maxAge 1)', () => {
    expect(Math.floor(Date.now() / 1000) - t.second.claims.auth_time!).toBeLessThanOrEqual(1 + 30);
  });
});

describe('oidcc-max-age-10000', () => {
  const t = twoAuthorizations(() => ({ max_age: '10000' }), { maxAge: 10000 });
  it('CheckIdTokenAuthTimeClaimsSameIfPresent', () => {
    expect(t.second.claims.auth_time).toBe(t.first.claims.auth_time);
  });
  itKeepsTheSubject(t);
  it('no second login page (the sign-in is known and within max_age)', () => {
    expect(t.browser.signInPages).toHaveLength(1);
  });
});

describe('oidcc-refresh-token', () => {
  let browser: Browser;
  let first: CodeFlow;
  let refreshResponse: Response;
  let refreshed: oauth.TokenEndpointResponse;
  let client2: oauth.Client;
  let client2Tokens: CodeFlow;
  beforeAll(async () => {
    browser = await newBrowser();
    first = await codeFlow(browser);
    await nextSecondAfter(first.claims.iat); // WaitForOneSecond
    refreshResponse = await refreshRequest(first.tokens.refresh_token!, {
      additionalParameters: { scope: SCOPE }, // AddScopeToTokenEndpointRequest
    });
    refreshed = await oauth.processRefreshTokenResponse(as, client, refreshResponse);
    client2 = await registerPublicClient('OIDC conformance second client');
    client2Tokens = await codeFlow(browser, {}, { c: client2 });
  });
  it('EnsureServerConfigurationSupportsRefreshToken', () => {
    expect(as.grant_types_supported).toContain('refresh_token');
  });
  it('EnsureRefreshTokenContainsAllowedCharactersOnly', () => {
    expect(first.tokens.refresh_token).toMatch(/^[\x20-\x7E]+$/);
  });
  it('CheckTokenEndpointHttpStatus200', () => {
    expect(refreshResponse.status).toBe(200);
  });
  it('CheckTokenEndpointReturnedJsonContentType', () => {
    expect(refreshResponse.headers.get('content-type')).toMatch(/^application\/json\b/);
  });
  it('CheckTokenEndpointCacheHeaders', () => {
    expect(refreshResponse.headers.get('cache-control')).toMatch(/\bno-store\b/);
  });
  it('ExtractAccessTokenFromTokenResponse, CheckTokenTypeIsBearer', () => {
    expect(refreshed.access_token).toBeTruthy();
    expect(refreshed.token_type).toBe('bearer');
  });
  it('ExtractExpiresInFromTokenEndpointResponse, ValidateExpiresIn', () => {
    expect(refreshed.expires_in).toBeGreaterThan(0);
  });
  it('EnsureAccessTokenValuesAreDifferent', () => {
    expect(refreshed.access_token).not.toBe(first.tokens.access_token);
  });
  it('ExtractRefreshTokenFromTokenResponse, EnsureMinimumRefreshTokenLength', () => {
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(first.tokens.refresh_token);
    expect(refreshed.refresh_token!.length).toBeGreaterThanOrEqual(22); // 128 bits of base64url
  });
  it('ExtractIdTokenFromTokenResponse, CompareIdTokenClaims (OIDC Core §12.2; processRefreshTokenResponse validates it)', async () => {
    const second = oauth.getValidatedIdTokenClaims(refreshed)!;
    expect(second).toBeDefined();
    await oauth.validateApplicationLevelSignature(as, refreshResponse);
    expect(second.iss).toBe(first.claims.iss);
    expect(second.sub).toBe(first.claims.sub);
    expect(second.iat).not.toBe(first.claims.iat);
    expect([second.aud].flat().sort()).toEqual([first.claims.aud].flat().sort());
    expect(second.auth_time).toBe(first.claims.auth_time);
    expect(second.azp).toBe(first.claims.azp);
  });
  it('CallProtectedResourceWithBearerToken (the refreshed access token at userinfo)', async () => {
    const res = await oauth.userInfoRequest(as, client, refreshed.access_token);
    expect((await oauth.processUserInfoResponse(as, client, first.claims.sub, res)).sub).toBe(
      browser.user.sub,
    );
  });
  it("RefreshTokenRequestExpectingErrorSteps (the second client's refresh token presented by the first: invalid_grant)", async () => {
    const res = await refreshRequest(client2Tokens.tokens.refresh_token!);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
    const err = await oauth.processRefreshTokenResponse(as, client, res).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(oauth.ResponseBodyError);
    expect((err as oauth.ResponseBodyError).error).toBe('invalid_grant');
  });
});

// Modules that add one parameter the provider may ignore and expect the ordinary flow to succeed.
describe.each([
  ['oidcc-display-page', { display: 'page' }],
  ['oidcc-display-popup', { display: 'popup' }],
  ['oidcc-login-hint', { login_hint: 'someone@example.com' }],
  ['oidcc-ui-locales', { ui_locales: 'se' }],
  ['oidcc-claims-locales', { claims_locales: 'se' }],
  ['oidcc-ensure-request-with-acr-values-succeeds', { acr_values: '1 2' }],
  ['oidcc-ensure-request-with-unknown-parameter-succeeds', { extra: 'foobar' }],
])('%s', (_module, params) => {
  it('CheckIfAuthorizationEndpointError, CheckIfTokenEndpointResponseError, ValidateIdToken', async () => {
    const flow = await codeFlow(await newBrowser(), params);
    expect(flow.claims.sub).toBeTruthy();
  });
});

describe('oidcc-response-type-missing', () => {
  let a: Authorization;
  beforeAll(async () => {
    a = await authorize(await newBrowser(), { response_type: undefined });
  });
  it('ExpectResponseTypeMissingErrorPage (no page: the error goes back to the trusted redirect_uri, as the suite allows)', () => {
    expect(a.outcome.kind).toBe('callback');
  });
  it('performGenericAuthorizationEndpointErrorResponseValidation (state, RFC 9207 iss, error characters, no code)', () => {
    const cb = callbackOf(a);
    expect(cb.searchParams.get('state')).toBe(a.state);
    expect(cb.searchParams.get('iss')).toBe(https.issuer);
    expect(cb.searchParams.get('error')).toMatch(ERROR_CHARS);
    expect(cb.searchParams.get('error_description')).toMatch(ERROR_CHARS);
    expect(cb.searchParams.get('code')).toBeNull();
  });
  it('CheckErrorFromAuthorizationEndpointErrorInvalidRequestOrUnsupportedResponseType', () => {
    const err = authResponseError(a);
    expect(err).toBeInstanceOf(oauth.AuthorizationResponseError);
    expect(['invalid_request', 'unsupported_response_type']).toContain(
      (err as oauth.AuthorizationResponseError).error,
    );
  });
});

describe('oidcc-id-token-hint', () => {
  // AddPromptNoneToAuthorizationEndpointRequest, AddIdTokenHintFromFirstLoginToAuthorizationEndpointRequest
  const t = twoAuthorizations((first) => ({ prompt: 'none', id_token_hint: first.tokens.id_token }));
  it('CheckIdTokenAuthTimeClaimsSameIfPresent', () => {
    expect(t.second.claims.auth_time).toBe(t.first.claims.auth_time);
  });
  itKeepsTheSubject(t);
  it('the second authorization did not interact with the user', () => {
    expect(t.browser.signInPages).toHaveLength(1);
  });
});

// AbstractOIDCCScopesServerTest: the flow with the scope, then userinfo. The suite's VerifyScopesReturnedInUserInfoClaims
// (a WARNING, not a failure) wants every standard claim of each scope; userinfo answers `sub` and `email` only, so
// the suite warns for `profile` (no profile claims) and for `email` (no email_verified). docs/idp.md says so.
describe.each([
  ['oidcc-scope-profile', 'openid profile'],
  ['oidcc-scope-email', 'openid email'],
])('%s', (_module, scope) => {
  let flow: CodeFlow;
  let info: oauth.UserInfoResponse;
  beforeAll(async () => {
    flow = await codeFlow(await newBrowser(), { scope });
    info = await userInfoOf(flow);
  });
  it('OIDCCCheckScopesSupportedContainScopeTest (the module runs: its scopes are in scopes_supported)', () => {
    for (const s of scope.split(' ')) expect(as.scopes_supported).toContain(s);
  });
  it('CallUserInfoEndpointWithBearerToken, EnsureUserInfoContainsSub, VerifyUserInfoAndIdTokenInTokenEndpointSameSub', () => {
    expect(info.sub).toBe(flow.claims.sub);
  });
  it('ValidateUserInfoStandardClaims (every standard claim returned has its type)', () => {
    expect(typeof info.sub).toBe('string');
    expect(typeof info.email).toBe('string');
    expect(Object.keys(info).sort()).toEqual(['email', 'sub']);
  });
});

describe('oidcc-scope-all', () => {
  it('OIDCCCheckScopesSupportedContainScopeTest (address and phone are not in scopes_supported: the suite skips the module)', () => {
    expect(as.scopes_supported).not.toContain('address');
    expect(as.scopes_supported).not.toContain('phone');
  });
});

describe('oidcc-claims-essential', () => {
  let flow: CodeFlow;
  let info: oauth.UserInfoResponse;
  beforeAll(async () => {
    // AddUserInfoEssentialNameClaimToAuthorizationEndpointRequest; claims_parameter_supported is false, so the
    // provider ignores the parameter and the request must still succeed.
    flow = await codeFlow(await newBrowser(), {
      claims: JSON.stringify({ userinfo: { name: { essential: true } } }),
    });
    info = await userInfoOf(flow);
  });
  it('CheckIfAuthorizationEndpointError, CheckIfTokenEndpointResponseError (the request with claims succeeds)', () => {
    expect(flow.tokens.access_token).toBeTruthy();
  });
  it('EnsureUserInfoContainsSub', () => {
    expect(info.sub).toBe(flow.claims.sub);
  });
  it('EnsureIdTokenDoesNotContainName (EnsureUserInfoContainsName is a WARNING: the provider has no name claim)', () => {
    expect(flow.claims.name).toBeUndefined();
    expect(info.name).toBeUndefined();
  });
});
