import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { parseCookies, parseParams, redirect } from '../../lib/http.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import {
  AuthorizePageError,
  InvalidClientError,
  InvalidRequestError,
  LoginRequiredError,
  OAuthError,
  UnsupportedResponseTypeError,
} from '../errors.ts';
import { redirectUriMatches } from '../redirect-uris.ts';
import { grantScope, parseScope } from '../scopes.ts';
import type { SessionUser } from '../store/sessions.ts';
import { validateResource } from './resource.ts';

export const CLI_CLIENT_ID = 'platform-cli';
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/; // base64url(SHA-256) without padding

export function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('base64url');
}

/**
 * GET /oauth/authorize. Steps, in order: trust client_id and redirect_uri (else a plain 400 page), then every
 * other parameter (errors go back to the client), then the web session (else the login page, or
 * login_required for prompt=none), then the code.
 */
export const authorize: Endpoint = async (ctx, x) => {
  let params: Map<string, string>;
  try {
    params = parseParams(x.url.search.slice(1));
  } catch (err) {
    throw new AuthorizePageError((err as Error).message);
  }
  const { clientId, redirectUri } = await checkClientAndRedirect(ctx, params);
  const state = params.get('state');
  try {
    const request = checkParameters(ctx, params, clientId);
    const user = await sessionUser(ctx, x);
    if (!user) {
      if (params.get('prompt')?.split(' ').includes('none')) throw new LoginRequiredError('no web session');
      return redirect(x.res, loginRedirect(ctx, x.url));
    }
    const scope = grantScope(request.scope, ctx.config.services, entitledServices(ctx));
    const code = randomBytes(32).toString('base64url');
    await ctx.codes.create(hashCode(code), {
      clientId,
      userId: user.userId,
      subject: user.sub,
      email: user.email,
      codeChallenge: request.codeChallenge,
      redirectUri,
      scope,
      nonce: request.nonce,
      familyId: randomUUID(),
      authTime: Math.floor(Date.now() / 1000),
    });
    x.log.info({ clientId, sub: user.sub }, 'authorization code issued');
    redirect(x.res, withParams(redirectUri, { code, state, iss: ctx.config.issuer }));
  } catch (err) {
    if (!(err instanceof OAuthError) || err.status >= 500) throw err;
    redirect(
      x.res,
      withParams(redirectUri, {
        error: err.error,
        error_description: err.message,
        state,
        iss: ctx.config.issuer,
      }),
    );
  }
};

async function checkClientAndRedirect(ctx: IdpContext, params: Map<string, string>) {
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
  return { clientId, redirectUri };
}

function checkParameters(ctx: IdpContext, params: Map<string, string>, clientId: string) {
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
  return { codeChallenge, scope: parseScope(params.get('scope')), nonce };
}

async function sessionUser(ctx: IdpContext, x: Exchange): Promise<SessionUser | undefined> {
  const cookies = parseCookies(x.req.headers.cookie);
  for (const name of ctx.config.sessionCookies) {
    const token = cookies.get(name);
    if (token) {
      const user = await ctx.sessions.findBySessionToken(token);
      if (user) return user;
    }
  }
  return undefined;
}

/** Default entitlement (CONTRACT.md): every user with a `users` row gets every configured service. */
function entitledServices(ctx: IdpContext): ReadonlySet<string> {
  return new Set(ctx.config.services);
}

function loginRedirect(ctx: IdpContext, url: URL): string {
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
