import { createHash, randomBytes } from 'node:crypto';

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const CLI = 'platform-cli';
export const LOOPBACK = 'http://127.0.0.1:53682/callback';

export interface AuthorizeOptions {
  issuer: string;
  sessionToken?: string;
  params?: Record<string, string | undefined>;
  cookieName?: string;
}

/** GET /oauth/authorize without following redirects; returns status, Location and body. */
export async function authorizeRequest(o: AuthorizeOptions) {
  const { challenge, verifier } = pkcePair();
  const params: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: CLI,
    redirect_uri: LOOPBACK,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: randomBytes(8).toString('hex'),
    scope: 'openid profile email mcp:platform mcp:mail',
    ...o.params,
  };
  const u = new URL(`${o.issuer}/oauth/authorize`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  const res = await fetch(u, {
    redirect: 'manual',
    headers: o.sessionToken ? { cookie: `${o.cookieName ?? 'authjs.session-token'}=${o.sessionToken}` } : {},
  });
  const location = res.headers.get('location');
  return {
    res,
    status: res.status,
    location: location ? new URL(location) : undefined,
    body: await res.text(),
    verifier,
    params,
  };
}

/** A code for the session's user, ready to exchange. */
export async function obtainCode(o: AuthorizeOptions) {
  const r = await authorizeRequest(o);
  const code = r.location?.searchParams.get('code');
  if (r.status !== 302 || !code)
    throw new Error(`authorize did not issue a code: ${r.status} ${r.location} ${r.body}`);
  return {
    code,
    verifier: r.verifier,
    redirectUri: r.params.redirect_uri!,
    clientId: r.params.client_id!,
    location: r.location!,
  };
}

export async function postForm(url: string, form: Record<string, string | undefined>) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) if (v !== undefined) body.set(k, v);
  const res = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { res, status: res.status, json: json ?? {}, text };
}

/** Code → tokens through the real token endpoint. */
export async function exchangeCode(
  issuer: string,
  c: { code: string; verifier: string; redirectUri: string; clientId: string },
) {
  return postForm(`${issuer}/oauth/token`, {
    grant_type: 'authorization_code',
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: c.redirectUri,
    client_id: c.clientId,
  });
}

export async function refresh(
  issuer: string,
  refreshToken: string,
  clientId = CLI,
  extra: Record<string, string> = {},
) {
  return postForm(`${issuer}/oauth/token`, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: clientId,
    ...extra,
  });
}

/** A full sign-in: tokens for a seeded user. */
export async function signIn(
  issuer: string,
  sessionToken: string,
  params?: Record<string, string | undefined>,
) {
  const c = await obtainCode({ issuer, sessionToken, params });
  const r = await exchangeCode(issuer, c);
  if (r.status !== 200) throw new Error(`token exchange failed: ${r.status} ${r.text}`);
  return r.json as {
    access_token: string;
    refresh_token: string;
    id_token?: string;
    scope: string;
    expires_in: number;
  };
}
