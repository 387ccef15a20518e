import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { parseCookies, parseParams, redirect } from '../../lib/http.ts';
import { consentHost, needsConsent, renderConsent } from '../consent.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import {
  AccessDeniedError,
  AuthorizePageError,
  ConsentRequiredError,
  InvalidClientError,
  InvalidRequestError,
  LoginRequiredError,
  OAuthError,
  UnsupportedResponseTypeError,
} from '../errors.ts';
import { redirectUriMatches } from '../redirect-uris.ts';
import { grantScope, mayHoldAdminScope, parseScope } from '../scopes.ts';
import type { Client } from '../store/clients.ts';
import type { SessionUser } from '../store/sessions.ts';
import { validateResource } from './resource.ts';

export const CLI_CLIENT_ID = 'platform-cli';
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/; // base64url(SHA-256) without padding

export function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('base64url');
}

/** The web session behind a request: the one cookie the configuration names, and its user. */
export interface WebSession {
  token: string;
  user: SessionUser;
}

/**
 * GET /oauth/authorize. Steps, in order: trust client_id and redirect_uri (else a plain 400 page), then every
 * other parameter (errors go back to the client), then the web session (else the login page, or
 * login_required for prompt=none), then consent (else the consent page, or consent_required for
 * prompt=none), then the code.
 */
export const authorize: Endpoint = async (ctx, x) => {
  let params: Map<string, string>;
  try {
    params = parseParams(x.url.search.slice(1));
  } catch (err) {
    throw new AuthorizePageError((err as Error).message);
  }
  const { client, redirectUri } = await checkClientAndRedirect(ctx, params);
  const state = params.get('state');
  await redirectingErrors(ctx, x, { redirectUri, state }, async () => {
    const request = checkParameters(ctx, params, client.clientId);
    const session = await webSession(ctx, x);
    if (!session) {
      if (request.prompt.has('none')) throw new LoginRequiredError('no web session');
      return redirect(x.res, loginRedirect(ctx, x.url));
    }
    if (await ctx.blocks.isBlocked(session.user.email)) throw new AccessDeniedError('the user is blocked');
    const scope = grantScope({
      requested: request.scope,
      services: ctx.config.services,
      entitled: await entitledServices(ctx, session.user),
      isAdmin: mayHoldAdminScope(ctx.config, { email: session.user.email, clientId: client.clientId }),
    });
    if (await needsConsent(ctx, { client, email: session.user.email, scope, prompt: request.prompt })) {
      if (request.prompt.has('none')) throw new ConsentRequiredError('the user has not approved this client');
      return renderConsent(ctx, x, { client, redirectUri, session, scope, params });
    }
    await issueCode(ctx, x, { client, redirectUri, state, user: session.user, scope, request });
  });
};

export type AuthorizationRequest = ReturnType<typeof checkParameters>;

/** Runs `step`; an OAuth error it throws goes back to the (already trusted) redirect URI. */
export async function redirectingErrors(
  ctx: IdpContext,
  x: Exchange,
  to: { redirectUri: string; state: string | undefined },
  step: () => Promise<void>,
): Promise<void> {
  try {
    await step();
  } catch (err) {
    if (!(err instanceof OAuthError) || err.status >= 500) throw err;
    redirect(
      x.res,
      withParams(to.redirectUri, {
        error: err.error,
        error_description: err.message,
        state: to.state,
        iss: ctx.config.issuer,
      }),
    );
  }
}

export async function issueCode(
  ctx: IdpContext,
  x: Exchange,
  o: {
    client: Client;
    redirectUri: string;
    state: string | undefined;
    user: SessionUser;
    scope: string;
    request: AuthorizationRequest;
  },
): Promise<void> {
  const code = randomBytes(32).toString('base64url');
  const created = await ctx.codes.create(hashCode(code), {
    clientId: o.client.clientId,
    userId: o.user.userId,
    subject: o.user.sub,
    email: o.user.email,
    codeChallenge: o.request.codeChallenge,
    redirectUri: o.redirectUri,
    scope: o.scope,
    nonce: o.request.nonce,
    familyId: randomUUID(),
    authTime: Math.floor(Date.now() / 1000),
  });
  if (!created) throw new AccessDeniedError('the user is blocked');
  x.log.info({ clientId: o.client.clientId, sub: o.user.sub }, 'authorization code issued');
  redirect(x.res, withParams(o.redirectUri, { code, state: o.state, iss: ctx.config.issuer }));
}

export async function checkClientAndRedirect(ctx: IdpContext, params: ReadonlyMap<string, string>) {
  const clientId = params.get('client_id');
  if (!clientId) throw new AuthorizePageError('client_id is missing');
  const client = await ctx.clients.find(clientId).catch((err: unknown) => {
    // A metadata document that cannot be fetched or fails validation: the client cannot be trusted.
    if (err instanceof InvalidClientError) throw new AuthorizePageError(err.message);
    throw err;
  });
  if (!client) throw new AuthorizePageError('client_id is not a registered client');
  const redirectUri = params.get('redirect_uri');
  if (!redirectUri) throw new AuthorizePageError('redirect_uri is missing');
  if (!redirectUriMatches(client.redirectUris, redirectUri)) {
    throw new AuthorizePageError('redirect_uri is not registered for this client');
  }
  return { client, redirectUri, host: consentHost(client, redirectUri) };
}

const PROMPTS = new Set(['none', 'login', 'consent', 'select_account']);

export function checkParameters(ctx: IdpContext, params: ReadonlyMap<string, string>, clientId: string) {
  const responseType = params.get('response_type');
  if (!responseType) throw new InvalidRequestError('response_type is missing');
  if (responseType !== 'code') throw new UnsupportedResponseTypeError('only response_type=code is supported');
  const codeChallenge = params.get('code_challenge');
  if (!codeChallenge) throw new InvalidRequestError('code_challenge is required (PKCE is mandatory)');
  const method = params.get('code_challenge_method');
  if (method !== 'S256') throw new InvalidRequestError('code_challenge_method must be S256');
  if (!PKCE_CHALLENGE.test(codeChallenge))
    throw new InvalidRequestError('code_challenge is not a base64url S256 digest');
  if (clientId === CLI_CLIENT_ID && !params.get('state')) throw new InvalidRequestError('state is required');
  if (params.has('request') || params.has('request_uri')) {
    throw new OAuthError('request_not_supported', 'request objects are not supported');
  }
  const resource = params.get('resource');
  if (resource !== undefined) validateResource(ctx.config, resource);
  const responseMode = params.get('response_mode');
  if (responseMode !== undefined && responseMode !== 'query') {
    throw new InvalidRequestError('only response_mode=query is supported');
  }
  const nonce = params.get('nonce');
  if (nonce !== undefined && nonce.length > 512) throw new InvalidRequestError('nonce is too long');
  const prompt = new Set(parseScope(params.get('prompt')));
  for (const p of prompt)
    if (!PROMPTS.has(p)) throw new InvalidRequestError(`prompt "${p}" is not supported`);
  if (prompt.has('none') && prompt.size > 1)
    throw new InvalidRequestError('prompt=none cannot be combined with another prompt');
  return { codeChallenge, scope: parseScope(params.get('scope')), nonce, prompt };
}

/** Only the one configured cookie is read (an https issuer reads only the __Secure- name). */
export async function webSession(ctx: IdpContext, x: Exchange): Promise<WebSession | undefined> {
  const token = parseCookies(x.req.headers.cookie).get(ctx.config.sessionCookie);
  if (!token) return undefined;
  const user = await ctx.sessions.findBySessionToken(token);
  return user ? { token, user } : undefined;
}

/** The services the user may get tokens for: every configured one, or the user's grants (entitlements.ts). */
export function entitledServices(ctx: IdpContext, user: SessionUser): Promise<ReadonlySet<string>> {
  return ctx.entitlements.services(user);
}

export function loginRedirect(ctx: IdpContext, url: URL): string {
  const back = `${ctx.config.issuer}${url.pathname}${url.search}`;
  const login = new URL(ctx.config.loginUrl);
  login.searchParams.set('callbackUrl', back);
  return login.toString();
}

function withParams(base: string, params: Record<string, string | undefined>): string {
  const u = new URL(base);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}
