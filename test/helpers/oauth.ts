import { createHash, randomBytes } from 'node:crypto';

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const CLI = 'platform-cli';
export const LOOPBACK = 'http://127.0.0.1:53682/callback';

export interface AuthorizeOptions {
  issuer: string;
  /** Where requests go when the issuer is not reachable as written (an https issuer in front of a test). */
  baseUrl?: string;
  sessionToken?: string;
  params?: Record<string, string | undefined>;
  /** Default: the name the IdP reads for this issuer (`__Secure-authjs.session-token` on https). */
  cookieName?: string;
  /**
   * When the IdP answers with its consent page, the test user's answer: `approve` or `deny` is posted back
   * through the page's own form (with its CSRF token); unset leaves the page as the result.
   */
  consent?: 'approve' | 'deny';
}

/** The web-session cookie name the IdP reads by default for `issuer`. */
export function sessionCookieName(issuer: string): string {
  return issuer.startsWith('https:') ? '__Secure-authjs.session-token' : 'authjs.session-token';
}

/** The consent page's form: the hidden fields (authorization request + csrf_token), unescaped. */
export function parseConsentForm(html: string): { action: string; fields: Map<string, string> } | undefined {
  const form = /<form method="post" action="([^"]*)">([\s\S]*?)<\/form>/.exec(html);
  if (!form) return undefined;
  const decode = (v: string) => v.replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)));
  const fields = new Map<string, string>();
  for (const m of form[2]!.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    fields.set(decode(m[1]!), decode(m[2]!));
  }
  return { action: decode(form[1]!), fields };
}

/**
 * The test user answers a consent page over HTTP, as a browser would: POST the page's form (its hidden fields
 * and CSRF token) with the session cookie and the chosen decision. Returns the IdP's answer, unfollowed.
 */
export async function answerConsent(o: {
  url: string;
  html: string;
  sessionToken: string;
  cookieName: string;
  decision: 'approve' | 'deny';
  override?: Record<string, string | undefined>;
}) {
  const form = parseConsentForm(o.html);
  if (!form) throw new Error(`not a consent page: ${o.html.slice(0, 300)}`);
  const body = new URLSearchParams();
  for (const [k, v] of form.fields) body.set(k, v);
  body.set('decision', o.decision);
  for (const [k, v] of Object.entries(o.override ?? {})) {
    if (v === undefined) body.delete(k);
    else body.set(k, v);
  }
  const res = await fetch(new URL(form.action, o.url), {
    method: 'POST',
    redirect: 'manual',
    body,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie: `${o.cookieName}=${o.sessionToken}`,
    },
  });
  const location = res.headers.get('location');
  return {
    res,
    status: res.status,
    location: location ? new URL(location) : undefined,
    body: await res.text(),
  };
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
  const u = new URL(`${o.baseUrl ?? o.issuer}/oauth/authorize`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  const cookieName = o.cookieName ?? sessionCookieName(o.issuer);
  const res = await fetch(u, {
    redirect: 'manual',
    headers: o.sessionToken ? { cookie: `${cookieName}=${o.sessionToken}` } : {},
  });
  const location = res.headers.get('location');
  const first = {
    res,
    status: res.status,
    location: location ? new URL(location) : undefined,
    body: await res.text(),
    verifier,
    params,
    /** True when the IdP showed its consent page (answered or not). */
    consentShown: false,
  };
  if (res.status !== 200 || !o.sessionToken || !parseConsentForm(first.body)) return first;
  first.consentShown = true;
  if (!o.consent) return first;
  const answer = await answerConsent({
    url: u.toString(),
    html: first.body,
    sessionToken: o.sessionToken,
    cookieName,
    decision: o.consent,
  });
  return { ...first, ...answer, consentPage: first.body };
}

/** A code for the session's user, ready to exchange (consent, when asked, is approved). */
export async function obtainCode(o: AuthorizeOptions) {
  const r = await authorizeRequest({ consent: 'approve', ...o });
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

export async function postForm(
  url: string,
  form: Record<string, string | undefined>,
  headers: Record<string, string> = {},
) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) if (v !== undefined) body.set(k, v);
  const res = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
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

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export interface DeviceStart {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** RFC 8628 §3.1: a device authorization request through the real endpoint. */
export async function startDevice(issuer: string, form: Record<string, string> = {}): Promise<DeviceStart> {
  const r = await postForm(`${issuer}/oauth/device_authorization`, { client_id: CLI, ...form });
  if (r.status !== 200) throw new Error(`device authorization failed: ${r.status} ${r.text}`);
  return r.json as unknown as DeviceStart;
}

/**
 * The signed-in user opens the verification page for the device's code and answers it through the page's own
 * form. Returns the page first shown and the answer (unfollowed).
 */
export async function answerDevice(
  issuer: string,
  d: DeviceStart,
  sessionToken: string,
  decision: 'approve' | 'deny' = 'approve',
) {
  const cookieName = sessionCookieName(issuer);
  const res = await fetch(d.verification_uri_complete, {
    redirect: 'manual',
    headers: { cookie: `${cookieName}=${sessionToken}` },
  });
  const page = { status: res.status, body: await res.text() };
  if (page.status !== 200) return { page, answer: undefined };
  const answer = await answerConsent({
    url: d.verification_uri_complete,
    html: page.body,
    sessionToken,
    cookieName,
    decision,
  });
  return { page, answer };
}

/** One device-code poll at the token endpoint. */
export function pollDevice(issuer: string, deviceCode: string, clientId = CLI) {
  return postForm(`${issuer}/oauth/token`, {
    grant_type: DEVICE_GRANT,
    device_code: deviceCode,
    client_id: clientId,
  });
}
