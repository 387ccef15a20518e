import { createHash, randomBytes } from 'node:crypto';
import { redirect } from '../../lib/http.ts';
import type { Exchange, IdpContext } from '../context.ts';
import { NotFoundError } from '../errors.ts';
import { html, page, sendPage } from '../pages/html.ts';
import { loginRedirect, webSession } from '../session/web-session.ts';
import { sessionHash } from '../store/sessions.ts';
import type { OAuthConnection } from './file.ts';
import type { ConnectionsService } from './service.ts';
import {
  tokenRequest,
  UpstreamRefusedError,
  type UpstreamTokens,
  UpstreamUnavailableError,
} from './upstream.ts';

// The connect flow of an `oauth` connection, on the IdP's origin (docs/connections.md § Connecting):
// GET /connections/<name> with the web session starts an authorization-code flow at the upstream (PKCE S256,
// RFC 7636; `resource`, RFC 8707), with a `state` stored (hashed) for that session alone; the upstream sends the
// browser to GET /connections/<name>/callback, which takes that state once, checks it is this session's, and
// exchanges the code. A state of another session (a login-CSRF: an attacker's code in the victim's browser, or
// the victim's in the attacker's), a state used twice or none at all ends on an error page with nothing stored.

const STATE_TTL_SECONDS = 600;
/** The longest return_to kept (a URL that would not fit in a page's link is not one we follow). */
const MAX_RETURN_TO = 2048;

const hash = (v: string) => createHash('sha256').update(v).digest('base64url');

/** Where the upstream sends the browser back: fixed per connection, on the issuer. */
export function callbackUri(ctx: IdpContext, name: string): string {
  return `${ctx.config.issuer}/connections/${encodeURIComponent(name)}/callback`;
}

/**
 * `return_to` when it may be followed: a URL on PUBLIC_BASE_URL's origin, or http on 127.0.0.1 / localhost with
 * an explicit port (a local client's loopback page). Anything else is ignored, never an open redirect.
 */
export function returnTo(ctx: IdpContext, value: string | null): string | undefined {
  if (!value || value.length > MAX_RETURN_TO) return undefined;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return undefined;
  }
  if (u.username || u.password) return undefined;
  const base = ctx.config.publicBaseUrl;
  if (base !== undefined && u.origin === new URL(base).origin) return u.toString();
  if (u.protocol === 'http:' && (u.hostname === '127.0.0.1' || u.hostname === 'localhost') && u.port !== '')
    return u.toString();
  return undefined;
}

function connectionPage(title: string, body: ReturnType<typeof html>): string {
  return page(title, html`<p class="brand">Platform connections</p>${body}`);
}

/** A connect flow that cannot go on: an error page (4xx, or 502 when the upstream cannot be reached). */
export class ConnectPageError extends Error {
  override readonly name = 'ConnectPageError';
  readonly status: number;
  constructor(reason: string, status: number) {
    super(reason);
    this.status = status;
  }
}

function refused(reason: string, status = 400): never {
  throw new ConnectPageError(reason, status);
}

/** The page of a ConnectPageError. */
export function connectErrorPage(err: ConnectPageError): string {
  return connectionPage(
    'Not connected',
    html`<h1>Nothing was connected</h1>
<p class="problem">${err.message}</p>
<p class="note">Start again from the link the tool or the command line gave you; if it keeps happening, tell your
platform administrators.</p>`,
  );
}

function oauthConnection(ctx: IdpContext, name: string): { svc: ConnectionsService; c: OAuthConnection } {
  const svc = ctx.connections;
  const c = svc?.get(name);
  if (!svc || !c) throw new NotFoundError(`no connection ${name}`);
  if (c.kind !== 'oauth')
    refused(`${c.displayName} is connected by signing in to the web application, not here`, 404);
  return { svc, c };
}

/** GET /connections/<name>: the web session's user is sent to the upstream's authorization endpoint. */
export async function startConnect(ctx: IdpContext, x: Exchange, name: string): Promise<void> {
  const { svc, c } = oauthConnection(ctx, name);
  const session = await webSession(ctx, x);
  if (!session) return redirect(x.res, loginRedirect(ctx, x.url), { 'cache-control': 'no-store' });
  if (await ctx.blocks.isBlocked(session.user.email)) refused('your account is blocked', 403);
  let endpoints: Awaited<ReturnType<ConnectionsService['endpoints']>>;
  try {
    endpoints = await svc.endpoints(c);
  } catch (err) {
    if (!(err instanceof UpstreamUnavailableError)) throw err;
    x.log.warn({ connection: name, reason: err.message }, 'connection metadata unavailable');
    refused(`${c.displayName} cannot be reached right now; try again later`, 502);
  }
  const state = randomBytes(32).toString('base64url');
  const verifier = randomBytes(32).toString('base64url');
  await ctx.pool.query(
    `INSERT INTO platform.connection_states
            (state_hash, session_hash, user_id, connection, code_verifier, return_to, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`,
    [
      hash(state),
      sessionHash(session.token),
      session.user.userId,
      name,
      verifier,
      returnTo(ctx, x.url.searchParams.get('return_to')) ?? null,
      STATE_TTL_SECONDS,
    ],
  );
  const to = new URL(endpoints.authorizationEndpoint);
  to.searchParams.set('response_type', 'code');
  to.searchParams.set('client_id', c.clientId);
  to.searchParams.set('redirect_uri', callbackUri(ctx, name));
  if (c.scopes.length > 0) to.searchParams.set('scope', c.scopes.join(' '));
  to.searchParams.set('state', state);
  to.searchParams.set('code_challenge', createHash('sha256').update(verifier).digest('base64url'));
  to.searchParams.set('code_challenge_method', 'S256');
  if (c.resource) to.searchParams.set('resource', c.resource);
  x.log.info({ connection: name, userId: session.user.userId }, 'connect started');
  redirect(x.res, to.toString(), { 'cache-control': 'no-store' });
}

/** GET /connections/<name>/callback: the state taken once for this session, the code exchanged, the grant stored. */
export async function finishConnect(ctx: IdpContext, x: Exchange, name: string): Promise<void> {
  const { svc, c } = oauthConnection(ctx, name);
  const q = x.url.searchParams;
  const state = q.get('state');
  if (!state) refused('the answer from the upstream carries no state; start again from the connect link');
  const session = await webSession(ctx, x);
  if (!session) refused('there is no signed-in session in this browser; sign in and connect again', 401);
  // Taken (deleted) whatever follows: a state is good for one answer, also a refused one.
  const { rows } = await ctx.pool.query<{
    session_hash: string;
    user_id: string;
    connection: string;
    code_verifier: string;
    return_to: string | null;
  }>(
    `DELETE FROM platform.connection_states WHERE state_hash = $1 AND expires_at > now()
     RETURNING session_hash, user_id, connection, code_verifier, return_to`,
    [hash(state)],
  );
  const flow = rows[0];
  if (!flow) refused('this connect link was already used or has expired; start again from the connect link');
  if (flow.session_hash !== sessionHash(session.token) || flow.user_id !== session.user.userId)
    refused('this answer belongs to a connect flow started in another session; nothing was connected', 403);
  if (flow.connection !== name) refused('this answer belongs to another connection; nothing was connected');
  const error = q.get('error');
  if (error !== null) {
    const code = /^[\x20-\x7E]{1,64}$/.test(error) ? error : 'an error';
    refused(`${c.displayName} answered ${code}; nothing was connected`);
  }
  const code = q.get('code');
  if (!code) refused(`${c.displayName} sent no authorization code; nothing was connected`);
  const endpoints = await svc.endpoints(c);
  // RFC 9207: a server that says it names itself in the answer must name itself (a mix-up attack otherwise).
  if (endpoints.issParameter && q.get('iss') !== endpoints.issuer)
    refused(`the answer does not come from ${c.displayName}'s issuer; nothing was connected`);
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code,
    redirect_uri: callbackUri(ctx, name),
    code_verifier: flow.code_verifier,
  });
  if (c.resource) form.set('resource', c.resource);
  let tokens: UpstreamTokens;
  try {
    tokens = await tokenRequest(c, endpoints.tokenEndpoint, form);
  } catch (err) {
    if (err instanceof UpstreamRefusedError)
      refused(`${c.displayName} refused the code (${err.error}); nothing was connected`);
    if (err instanceof UpstreamUnavailableError) {
      x.log.warn({ connection: name, reason: err.message }, 'connect code exchange failed');
      refused(`${c.displayName} could not be reached to finish connecting; nothing was connected`, 502);
    }
    throw err;
  }
  const user = { userId: session.user.userId, email: session.user.email };
  await svc.store(user, c, tokens, 'connect');
  x.log.info({ connection: name, userId: user.userId }, 'connection connected');
  const back = flow.return_to ?? undefined;
  const scope = tokens.scope ?? c.scopes.join(' ');
  sendPage(
    x.res,
    200,
    connectionPage(
      `${c.displayName} connected`,
      html`<h1 class="done">${c.displayName} is connected</h1>
<p>Your account at <span class="host">${c.displayName}</span> is now connected for ${session.user.email}. Tools behind
the platform can now act as you at ${c.displayName}${scope ? html`, with the permissions <span class="host">${scope}</span>` : ''}.</p>
${back ? html`<p><a href="${back}">Continue</a></p>` : html`<p>You can close this tab.</p>`}
<p class="note">You can disconnect at any time with <span class="host">platform connections disconnect ${name}</span>.</p>`,
    ),
  );
}
