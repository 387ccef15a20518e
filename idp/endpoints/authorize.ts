import { randomBytes, randomUUID } from 'node:crypto';
import { parseParams, redirect } from '../../lib/http.ts';
import { countedFetches } from '../cimd/index.ts';
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
import { MACHINE_CLIENT_TYPE } from '../machine-clients/index.ts';
import { RateLimitedError } from '../rate-limit.ts';
import { redirectUriMatches } from '../redirect-uris.ts';
import { adminPowers, grantScope, parseScope } from '../scopes.ts';
import { freshness, SIGN_IN_MARKER, signInMarker, takeSignInMarker } from '../session/freshness.ts';
import { loginRedirect, sessionCookie, type WebSession, webSession } from '../session/web-session.ts';
import type { Client } from '../store/clients.ts';
import { hashCode } from '../store/codes.ts';
import type { SessionUser } from '../store/sessions.ts';
import { recordGrantedResource, validateResource } from './resource.ts';

export const CLI_CLIENT_ID = 'platform-cli';
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/; // base64url(SHA-256) without padding

/** GET /oauth/authorize: the authorization request in the query. */
export const authorize: Endpoint = async (ctx, x) => {
  let params: Map<string, string>;
  try {
    params = parseParams(x.url.search.slice(1));
  } catch (err) {
    throw new AuthorizePageError((err as Error).message);
  }
  await authorizationRequest(ctx, x, params);
};

/**
 * An authorization request, sent by GET (the query) or POST (a form body, OIDC Core §3.1.2.1): the same steps
 * whichever way it came. In order: trust client_id and redirect_uri (else a plain 400 page), then every
 * other parameter (errors go back to the client), then the web session (else the login page, or
 * login_required for prompt=none), then how fresh its sign-in is (prompt=login, max_age: the login page again,
 * session/freshness.ts), then consent (else the consent page, or consent_required for prompt=none), then the
 * code. A metadata-document client the signed-in user has not approved (or any, with no session) gets none of
 * its errors back: they are shown on a page here (docs/clients.md).
 */
export async function authorizationRequest(
  ctx: IdpContext,
  x: Exchange,
  params: Map<string, string>,
): Promise<void> {
  const { client, redirectUri } = await checkClientAndRedirect(ctx, x, params);
  const state = params.get('state');
  const now = Math.floor(Date.now() / 1000);
  const sessionToken = sessionCookie(ctx, x);
  const back = takeSignInMarker(ctx, params, { clientId: client.clientId, sessionToken, now });
  const session = await webSession(ctx, x, { returningFromSignIn: back !== undefined && !back.sameSession });
  const redirectable = await errorsMayRedirect(ctx, client, session);
  await redirectingErrors(ctx, x, { redirectUri, state, redirectable }, async () => {
    const request = checkParameters(ctx, params, client.clientId);
    const signIn = () => {
      const marker = signInMarker(ctx, { clientId: client.clientId, at: now, sessionToken });
      // The way back is a GET carrying the request's parameters, also for a request that came by POST.
      const again = new URL(x.url.pathname, x.url);
      for (const [k, v] of params) again.searchParams.set(k, v);
      redirect(x.res, loginRedirect(ctx, again, { [SIGN_IN_MARKER]: marker }));
    };
    if (!session) {
      if (request.prompt.has('none')) throw new LoginRequiredError('no web session');
      return signIn();
    }
    const fresh = freshness(request, session.signIn, back, now);
    if (fresh === 'not-signed-in-again')
      throw new LoginRequiredError('the sign-in page came back without signing the user in again');
    if (fresh === 'sign-in') {
      if (request.prompt.has('none'))
        throw new LoginRequiredError('the sign-in is older than max_age, or of unknown age');
      return signIn();
    }
    if (await ctx.blocks.isBlocked(session.user.email)) throw new AccessDeniedError('the user is blocked');
    const scope = grantScope({
      requested: request.scope,
      services: ctx.config.services,
      entitled: await entitledServices(ctx, session.user),
      powers: adminPowers(ctx.config, { email: session.user.email, clientId: client.clientId }),
    });
    if (await needsConsent(ctx, { client, email: session.user.email, scope, prompt: request.prompt })) {
      if (request.prompt.has('none')) throw new ConsentRequiredError('the user has not approved this client');
      return renderConsent(ctx, x, { client, redirectUri, session, scope, params });
    }
    await issueCode(ctx, x, { client, redirectUri, state, session, scope, request });
  });
}

export type AuthorizationRequest = ReturnType<typeof checkParameters>;

/** Where an authorization error goes: the (already trusted) redirect URI, unless `redirectable` is false. */
export interface ErrorTarget {
  redirectUri: string;
  state: string | undefined;
  redirectable: boolean;
}

/**
 * True unless the client is a metadata-document client that the signed-in user has not approved (no stored
 * consent), or there is no signed-in user: anyone can write such a document naming any redirect URI on its own
 * host, so until a user has seen the consent page, sending the browser there would make this an open redirector.
 */
export async function errorsMayRedirect(
  ctx: IdpContext,
  client: Client,
  session: WebSession | undefined,
): Promise<boolean> {
  if (!client.metadataDocumentUrl) return true;
  if (!session) return false;
  return (await ctx.consents.find({ email: session.user.email, clientId: client.clientId })) !== undefined;
}

/** Runs `step`; an OAuth error it throws goes back to the redirect URI, or onto a page (ErrorTarget). */
export async function redirectingErrors(
  ctx: IdpContext,
  x: Exchange,
  to: ErrorTarget,
  step: () => Promise<void>,
): Promise<void> {
  try {
    await step();
  } catch (err) {
    if (!(err instanceof OAuthError) || err.status >= 500) throw err;
    if (!to.redirectable) throw new AuthorizePageError(`${err.message} (${err.error})`);
    redirectError(ctx, x, to, err);
  }
}

/** Sends the browser back to the client with `error`, `error_description`, `state` and `iss`. */
export function redirectError(ctx: IdpContext, x: Exchange, to: ErrorTarget, err: OAuthError): void {
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

export async function issueCode(
  ctx: IdpContext,
  x: Exchange,
  o: {
    client: Client;
    redirectUri: string;
    state: string | undefined;
    session: WebSession;
    scope: string;
    request: AuthorizationRequest;
  },
): Promise<void> {
  const code = randomBytes(32).toString('base64url');
  const user = o.session.user;
  const familyId = randomUUID();
  await recordGrantedResource(ctx, familyId, o.request.resource);
  const created = await ctx.codes.create(hashCode(code), {
    clientId: o.client.clientId,
    userId: user.userId,
    subject: user.sub,
    email: user.email,
    emailVerified: user.emailVerified,
    codeChallenge: o.request.codeChallenge,
    redirectUri: o.redirectUri,
    scope: o.scope,
    nonce: o.request.nonce,
    dpopJkt: o.request.dpopJkt,
    familyId,
    authTime: o.session.signIn.authTime,
  });
  if (!created) throw new AccessDeniedError('the user is blocked');
  x.log.info({ clientId: o.client.clientId, sub: user.sub }, 'authorization code issued');
  redirect(x.res, withParams(o.redirectUri, { code, state: o.state, iss: ctx.config.issuer }));
}

export async function checkClientAndRedirect(
  ctx: IdpContext,
  x: Exchange,
  params: ReadonlyMap<string, string>,
) {
  const clientId = params.get('client_id');
  if (!clientId) throw new AuthorizePageError('client_id is missing');
  const client = await ctx.clients
    .find(clientId, countedFetches(ctx.rateLimiter, x.req))
    .catch((err: unknown) => {
      if (err instanceof RateLimitedError) throw new AuthorizePageError(err.message, 429, err.retryAfter);
      // A metadata document that cannot be fetched or fails validation: the client cannot be trusted.
      if (err instanceof InvalidClientError) throw new AuthorizePageError(err.message);
      throw err;
    });
  if (!client) throw new AuthorizePageError('client_id is not a registered client');
  // A machine client acts as its registered email with client_credentials only; no user approves anything for it.
  if (client.type === MACHINE_CLIENT_TYPE)
    throw new AuthorizePageError(
      'unauthorized_client: this is a machine client; it gets tokens with client_credentials only, never through an authorization request',
    );
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
  const maxAgeText = params.get('max_age');
  if (maxAgeText !== undefined && !/^\d{1,10}$/.test(maxAgeText))
    throw new InvalidRequestError('max_age must be a number of seconds');
  const maxAge = maxAgeText === undefined ? undefined : Number(maxAgeText);
  // RFC 9449 §10: the JWK SHA-256 thumbprint the code is bound to (43 base64url characters).
  const dpopJkt = params.get('dpop_jkt');
  if (dpopJkt !== undefined && !/^[A-Za-z0-9_-]{43}$/.test(dpopJkt))
    throw new InvalidRequestError('dpop_jkt must be a base64url SHA-256 JWK thumbprint');
  return { codeChallenge, scope: parseScope(params.get('scope')), nonce, prompt, maxAge, dpopJkt, resource };
}

/** The services the user may get tokens for: every configured one, or the user's grants (entitlements.ts). */
export function entitledServices(ctx: IdpContext, user: SessionUser): Promise<ReadonlySet<string>> {
  return ctx.entitlements.services(user);
}

function withParams(base: string, params: Record<string, string | undefined>): string {
  const u = new URL(base);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}
