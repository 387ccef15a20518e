import { decodeJwt } from 'jose';
import { z } from 'zod';
import type { FetchGate, OutboundBudget } from '../outbound/index.ts';
import type { ConnectionConfig, OAuthConnection } from './file.ts';

// The IdP as an OAuth client of an upstream authorization server: metadata discovery, the token endpoint
// (authorization code, refresh token) and revocation. Every request has a deadline and follows no redirect;
// nothing the upstream sends back (a token, an error body) is ever put in an exception message.

const DEADLINE_MS = 5000;
const METADATA_TTL_MS = 3_600_000;
const MAX_BODY_BYTES = 256 * 1024;

/** The upstream could not be reached, answered garbage or an error other than a refusal: retry later. */
export class UpstreamUnavailableError extends Error {
  override readonly name = 'UpstreamUnavailableError';
}

/** The upstream answered an OAuth error (`error` is its code, e.g. `invalid_grant`: the grant is gone). */
export class UpstreamRefusedError extends Error {
  override readonly name = 'UpstreamRefusedError';
  readonly error: string;
  constructor(connection: string, error: string) {
    super(`the upstream of connection ${connection} refused the request: ${error}`);
    this.error = error;
  }
}

export interface UpstreamEndpoints {
  authorizationEndpoint: string;
  tokenEndpoint: string;
  revocationEndpoint: string | undefined;
  /** RFC 9207: the issuer the authorization response's `iss` must name, when the metadata says it sends one. */
  issuer: string | undefined;
  issParameter: boolean;
}

const metadataSchema = z
  .object({
    issuer: z.string(),
    authorization_endpoint: z.string().url(),
    token_endpoint: z.string().url(),
    revocation_endpoint: z.string().url().optional(),
    authorization_response_iss_parameter_supported: z.boolean().optional(),
    code_challenge_methods_supported: z.array(z.string()).optional(),
  })
  .passthrough();

/** The two discovery documents an issuer may publish, in the order they are tried (RFC 8414 §3, OIDC Discovery §4). */
export function metadataUrls(issuer: string): string[] {
  const u = new URL(issuer);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  return [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${u.origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * Discovery: the issuer's metadata by RFC 8414, then by OpenID discovery; the first document that parses and names
 * the same issuer wins. The one outbound metadata fetch of connections (one place to bound it).
 */
export async function discoverMetadata(
  issuer: string,
  fetchImpl: typeof fetch = fetch,
): Promise<z.infer<typeof metadataSchema>> {
  let last = 'no metadata document';
  for (const url of metadataUrls(issuer)) {
    let res: Response;
    try {
      res = await fetchImpl(url, {
        headers: { accept: 'application/json' },
        redirect: 'error',
        signal: AbortSignal.timeout(DEADLINE_MS),
      });
    } catch (err) {
      last = `${url}: ${(err as Error).name}`;
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel();
      last = `${url}: HTTP ${res.status}`;
      continue;
    }
    const parsed = metadataSchema.safeParse(await readJson(res));
    if (!parsed.success) {
      last = `${url}: not authorization server metadata`;
      continue;
    }
    if (parsed.data.issuer !== issuer) {
      last = `${url}: names issuer ${parsed.data.issuer}, not ${issuer}`;
      continue;
    }
    return parsed.data;
  }
  throw new UpstreamUnavailableError(`metadata of ${issuer} not found (${last})`);
}

async function readJson(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text.length > MAX_BODY_BYTES) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Endpoints of an oauth connection: configured, else discovered (kept an hour). Discovery goes through the IdP's
 * one outbound-fetch budget (idp/outbound): counted for the upstream's host, and a failed discovery is answered
 * again without a fetch for the budget's cool-down.
 */
export function createEndpointResolver(
  fetchImpl: typeof fetch = fetch,
  budget?: { outbound: OutboundBudget; gate: FetchGate },
) {
  const cache = new Map<string, { at: number; endpoints: UpstreamEndpoints }>();
  return async function endpoints(c: OAuthConnection): Promise<UpstreamEndpoints> {
    if (c.issuer === undefined)
      return {
        authorizationEndpoint: c.authorizationEndpoint!,
        tokenEndpoint: c.tokenEndpoint!,
        revocationEndpoint: c.revocationEndpoint,
        issuer: undefined,
        issParameter: false,
      };
    const key = `${c.name}\n${c.issuer}`;
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < METADATA_TTL_MS) return hit.endpoints;
    const issuer = c.issuer;
    const m = budget
      ? await budget.outbound.fetch(new URL(issuer), budget.gate, async () => ({
          value: await discoverMetadata(issuer, fetchImpl),
          cacheSeconds: METADATA_TTL_MS / 1000,
        }))
      : await discoverMetadata(issuer, fetchImpl);
    const endpoints: UpstreamEndpoints = {
      authorizationEndpoint: c.authorizationEndpoint ?? m.authorization_endpoint,
      tokenEndpoint: c.tokenEndpoint ?? m.token_endpoint,
      revocationEndpoint: c.revocationEndpoint ?? m.revocation_endpoint,
      issuer: m.issuer,
      issParameter: m.authorization_response_iss_parameter_supported === true,
    };
    cache.set(key, { at: Date.now(), endpoints });
    return endpoints;
  };
}

const tokenSchema = z
  .object({
    access_token: z.string().min(1).max(16_384),
    token_type: z.string().regex(/^bearer$/i, 'is not Bearer'),
    expires_in: z.coerce.number().int().positive().optional(),
    refresh_token: z.string().min(1).max(16_384).optional(),
    scope: z.string().max(4096).optional(),
    id_token: z.string().optional(),
  })
  .passthrough();

export interface UpstreamTokens {
  accessToken: string;
  refreshToken: string | undefined;
  /** Unix ms; undefined when the upstream did not say. */
  expiresAt: number | undefined;
  scope: string | undefined;
  /** The id_token's `sub`, when the upstream sent one (read from its own token endpoint over TLS, OIDC Core §3.1.3.7). */
  subject: string | undefined;
}

/** Client authentication at the token and revocation endpoints: Basic with a secret (Entra: in the body), else client_id. */
function authenticate(c: ConnectionConfig, form: URLSearchParams, headers: Record<string, string>): void {
  if (c.clientSecret === undefined) {
    form.set('client_id', c.clientId);
  } else if (c.kind === 'entra') {
    form.set('client_id', c.clientId);
    form.set('client_secret', c.clientSecret);
  } else {
    const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
    headers.authorization = `Basic ${Buffer.from(`${enc(c.clientId)}:${enc(c.clientSecret)}`).toString('base64')}`;
  }
}

async function post(
  c: ConnectionConfig,
  url: string,
  form: URLSearchParams,
  fetchImpl: typeof fetch,
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  authenticate(c, form, headers);
  let res: Response;
  try {
    res = await fetchImpl(url, {
      method: 'POST',
      headers,
      body: form.toString(),
      redirect: 'error',
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
  } catch (err) {
    throw new UpstreamUnavailableError(`${new URL(url).origin} unreachable (${(err as Error).name})`);
  }
  return { status: res.status, body: await readJson(res) };
}

/** A token-endpoint request: the tokens, UpstreamRefusedError for an OAuth error, else UpstreamUnavailableError. */
export async function tokenRequest(
  c: ConnectionConfig,
  tokenEndpoint: string,
  form: URLSearchParams,
  fetchImpl: typeof fetch = fetch,
): Promise<UpstreamTokens> {
  const { status, body } = await post(c, tokenEndpoint, form, fetchImpl);
  if (status !== 200) {
    const error = (body as { error?: unknown } | undefined)?.error;
    if (status >= 400 && status < 500 && typeof error === 'string' && /^[\x20-\x7E]{1,64}$/.test(error))
      throw new UpstreamRefusedError(c.name, error);
    throw new UpstreamUnavailableError(`the token endpoint of connection ${c.name} answered HTTP ${status}`);
  }
  const parsed = tokenSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UpstreamUnavailableError(
      `the token endpoint of connection ${c.name} answered no usable token (${issue.path.join('.')}: ${issue.message})`,
    );
  }
  const t = parsed.data;
  let subject: string | undefined;
  if (t.id_token) {
    try {
      const sub = decodeJwt(t.id_token).sub;
      subject = typeof sub === 'string' ? sub : undefined;
    } catch {
      subject = undefined;
    }
  }
  return {
    accessToken: t.access_token,
    refreshToken: t.refresh_token,
    expiresAt: t.expires_in === undefined ? undefined : Date.now() + t.expires_in * 1000,
    scope: t.scope,
    subject,
  };
}

/** RFC 7009 revocation; best effort: the caller has already dropped the grant. True when the upstream said 200. */
export async function revokeAtUpstream(
  c: ConnectionConfig,
  revocationEndpoint: string,
  token: string,
  hint: 'refresh_token' | 'access_token',
  fetchImpl: typeof fetch = fetch,
): Promise<boolean> {
  const form = new URLSearchParams({ token, token_type_hint: hint });
  const { status } = await post(c, revocationEndpoint, form, fetchImpl);
  return status === 200;
}
