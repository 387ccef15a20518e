import { csrfTokenValid, POWERS_NAMED_FIELD, servicesOf } from '../consent.ts';
import type { Exchange, IdpContext } from '../context.ts';
import { AccessDeniedError, AuthorizePageError } from '../errors.ts';
import { adminPowers, grantScope, parseScope, powersOf } from '../scopes.ts';
import { webSession } from '../session/web-session.ts';
import {
  checkClientAndRedirect,
  checkParameters,
  entitledServices,
  errorsMayRedirect,
  issueCode,
  redirectError,
  redirectingErrors,
} from './authorize.ts';

/**
 * The consent page's answer (a POST to /oauth/authorize that carries a consent-form field, authorize-post.ts). The form carries the authorization request unchanged, the
 * administrative scopes the page named (`powers_named`), the CSRF token and `decision` (approve | deny).
 * Everything is checked again as on GET; the token must belong to this session and this client, else nothing
 * happens (a plain 403 page, no redirect, no code). A valid token means this session was shown the page: a
 * deny then goes back to the client as access_denied, even for a metadata-document client never approved
 * before (docs/clients.md).
 */
export async function consentDecision(
  ctx: IdpContext,
  x: Exchange,
  params: Map<string, string>,
): Promise<void> {
  const given = params.get('csrf_token') ?? '';
  const decision = params.get('decision');
  const named = new Set(parseScope(params.get(POWERS_NAMED_FIELD)));
  params.delete('csrf_token');
  params.delete('decision');
  params.delete(POWERS_NAMED_FIELD);
  const { client, redirectUri } = await checkClientAndRedirect(ctx, x, params);
  const session = await webSession(ctx, x);
  if (!session)
    throw new AuthorizePageError('your sign-in session has ended; start again from the application', 403);
  if (!csrfTokenValid(ctx.csrfKey, session.token, client.clientId, given)) {
    x.log.warn({ clientId: client.clientId }, 'consent form refused: CSRF token does not match the session');
    throw new AuthorizePageError(
      'the consent form is not valid for this session; start again from the application',
      403,
    );
  }
  if (decision !== 'approve' && decision !== 'deny')
    throw new AuthorizePageError('decision must be approve or deny');
  const state = params.get('state');
  const redirectable = await errorsMayRedirect(ctx, client, session);
  await redirectingErrors(ctx, x, { redirectUri, state, redirectable }, async () => {
    const request = checkParameters(ctx, params, client.clientId);
    if (decision === 'deny') {
      x.log.info({ clientId: client.clientId }, 'consent denied');
      await ctx.refusals.record(
        {
          source: 'consent',
          error: 'access_denied',
          reason: 'the user denied consent',
          email: session.user.email,
          subject: session.user.sub,
          clientId: client.clientId,
          requestId: x.requestId,
        },
        x.log,
      );
      // The user saw the page and answered it: the answer goes back to the client (RFC 6749 §4.1.2.1).
      return redirectError(
        ctx,
        x,
        { redirectUri, state, redirectable: true },
        new AccessDeniedError('the user denied the request'),
      );
    }
    const scope = grantScope({
      requested: request.scope,
      services: ctx.config.services,
      entitled: await entitledServices(ctx, session.user),
      // Only the powers the page named in words (the form says which; it cannot be forged: CSRF token).
      powers: new Set(
        [...adminPowers(ctx.config, { email: session.user.email, clientId: client.clientId })].filter((p) =>
          named.has(p),
        ),
      ),
    });
    await ctx.consents.grant({
      email: session.user.email,
      clientId: client.clientId,
      clientName: client.name,
      services: servicesOf(scope),
      scopes: powersOf(scope),
    });
    await ctx.clients.recordApproved(client);
    x.log.info({ clientId: client.clientId, scope }, 'consent given');
    await issueCode(ctx, x, { client, redirectUri, state, session, scope, request });
  });
}
