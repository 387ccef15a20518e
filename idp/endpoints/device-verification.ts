import { readForm, redirect } from '../../lib/http.ts';
import { countedFetches } from '../cimd/index.ts';
import { CONSENT_EXEMPT_CLIENTS, csrfToken, csrfTokenValid, servicesOf } from '../consent.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { formatUserCode, hashDeviceSecret, normalizeUserCode } from '../device-codes.ts';
import { AuthorizePageError, OAuthError } from '../errors.ts';
import { deviceConfirmPage, deviceDonePage, deviceEntryPage } from '../pages/device.ts';
import { sendPage } from '../pages/html.ts';
import { RateLimitedError } from '../rate-limit.ts';
import { adminPowers, grantScope, parseScope, powersOf } from '../scopes.ts';
import { loginRedirect, type WebSession, webSession } from '../session/web-session.ts';
import type { Client } from '../store/clients.ts';
import type { DeviceRequest } from '../store/device-codes.ts';
import { entitledServices } from './authorize.ts';

/** The form token is bound to the session and to this user code (never valid for a consent form). */
const csrfSubject = (normalized: string) => `device\n${normalized}`;

type Found =
  | {
      ok: true;
      normalized: string;
      request: DeviceRequest;
      client: Client;
      /** What the device receives if the user allows it. */
      scope: string;
      /** Administrative scopes the device asked for and never gets (named on the page as left out). */
      withheld: string[];
    }
  | { ok: false; problem: string };

/**
 * The pending request a typed code names, with its client and the scope the user would grant: never an
 * administrative scope (`platform:admin`, `mail:send_as`), whoever approves — a device code is phishable
 * (RFC 8628 §5.4), and whoever started the flow receives what the approver allows.
 */
async function findRequest(ctx: IdpContext, x: Exchange, session: WebSession, typed: string): Promise<Found> {
  const normalized = normalizeUserCode(typed);
  if (!normalized)
    return { ok: false, problem: 'That is not a valid code: it has 8 letters, like BCDF-GHJK.' };
  const request = await ctx.deviceCodes.findByUserCode(hashDeviceSecret(normalized));
  if (!request) return { ok: false, problem: 'No device is waiting for that code. Check it and try again.' };
  if (request.expired) return { ok: false, problem: 'That code has expired. Start again on your device.' };
  if (request.status !== 'pending')
    return { ok: false, problem: 'That code has already been used. Start again on your device.' };
  let client: Client | undefined;
  try {
    client = await ctx.clients.find(request.clientId, countedFetches(ctx.rateLimiter, x.req));
  } catch (err) {
    if (!(err instanceof OAuthError) || err.status >= 500) throw err;
    return { ok: false, problem: `The device's application cannot be verified: ${err.message}` };
  }
  if (!client) return { ok: false, problem: 'The device’s application is no longer registered.' };
  const scope = grantScope({
    requested: parseScope(request.scope),
    services: ctx.config.services,
    entitled: await entitledServices(ctx, session.user),
    powers: adminPowers(ctx.config, {
      email: session.user.email,
      clientId: request.clientId,
      grant: 'device_code',
    }),
  });
  return { ok: true, normalized, request, client, scope, withheld: powersOf(request.scope) };
}

/**
 * GET /oauth/device: the verification page. Needs the web session (else the sign-in page, which comes back
 * here with the code); without `user_code` it asks for the code, with one it shows the client, its metadata
 * host and every scope the device will receive in words (and what it asked for and will not get), and asks
 * to allow or deny.
 */
export const deviceVerification: Endpoint = async (ctx, x) => {
  const session = await webSession(ctx, x);
  if (!session) return redirect(x.res, loginRedirect(ctx, x.url));
  await refuseBlocked(ctx, session);
  const typed = x.url.searchParams.get('user_code');
  if (typed === null || typed.trim() === '')
    return sendPage(x.res, 200, deviceEntryPage({ email: session.user.email }));
  // Code lookups count against the device limit (RFC 8628 §5.1: guessing user codes must be slow).
  try {
    await ctx.rateLimiter.consume('device', x.req);
  } catch (err) {
    if (!(err instanceof RateLimitedError)) throw err;
    x.res.setHeader('retry-after', String(err.retryAfter));
    return sendPage(
      x.res,
      429,
      deviceEntryPage({
        email: session.user.email,
        problem: `Too many codes were tried from this address. Wait ${err.retryAfter} seconds and try again.`,
      }),
    );
  }
  const found = await findRequest(ctx, x, session, typed.slice(0, 64));
  if (!found.ok) {
    return sendPage(
      x.res,
      400,
      deviceEntryPage({ email: session.user.email, typed: typed.slice(0, 64), problem: found.problem }),
    );
  }
  sendPage(
    x.res,
    200,
    deviceConfirmPage({
      clientId: found.client.clientId,
      clientName: found.client.name,
      metadataHost: found.client.metadataDocumentUrl
        ? new URL(found.client.metadataDocumentUrl).host
        : undefined,
      email: session.user.email,
      userCode: formatUserCode(found.normalized),
      scope: found.scope,
      withheld: found.withheld,
      csrfToken: csrfToken(ctx.csrfKey, session.token, csrfSubject(found.normalized)),
    }),
  );
};

/** A blocked user approves no device: a page saying so (403), whatever the code. */
async function refuseBlocked(ctx: IdpContext, session: WebSession): Promise<void> {
  if (await ctx.blocks.isBlocked(session.user.email))
    throw new AuthorizePageError('access denied: this account is blocked; ask an administrator', 403);
}

/** POST /oauth/device: the decision, with a CSRF token bound to the session and the code. */
export const deviceDecision: Endpoint = async (ctx, x) => {
  const form = await readForm(x.req, 8 * 1024);
  const session = await webSession(ctx, x);
  if (!session)
    throw new AuthorizePageError('your sign-in session has ended; sign in and enter the code again', 403);
  await refuseBlocked(ctx, session);
  const typed = (form.get('user_code') ?? '').slice(0, 64);
  const normalized = normalizeUserCode(typed);
  if (
    !normalized ||
    !csrfTokenValid(ctx.csrfKey, session.token, csrfSubject(normalized), form.get('csrf_token') ?? '')
  ) {
    x.log.warn('device form refused: CSRF token does not match the session and code');
    throw new AuthorizePageError('the form is not valid for this session; enter the code again', 403);
  }
  const decision = form.get('decision');
  if (decision !== 'approve' && decision !== 'deny')
    throw new AuthorizePageError('decision must be approve or deny');
  const found = await findRequest(ctx, x, session, typed);
  if (!found.ok) {
    return sendPage(x.res, 400, deviceEntryPage({ email: session.user.email, problem: found.problem }));
  }
  await decide(ctx, x, { session, found, approve: decision === 'approve' });
};

async function decide(
  ctx: IdpContext,
  x: Exchange,
  o: { session: WebSession; found: Extract<Found, { ok: true }>; approve: boolean },
): Promise<void> {
  const { session, found } = o;
  const user = session.user;
  const hash = hashDeviceSecret(found.normalized);
  const done = o.approve
    ? await ctx.deviceCodes.decide(hash, {
        approve: true,
        approval: {
          userId: user.userId,
          subject: user.sub,
          email: user.email,
          grantedScope: found.scope,
          authTime: session.signIn.authTime,
          emailVerified: user.emailVerified,
        },
      })
    : await ctx.deviceCodes.decide(hash, { approve: false });
  if (!done) {
    return sendPage(
      x.res,
      400,
      deviceEntryPage({ email: user.email, problem: 'That code has already been used or has expired.' }),
    );
  }
  if (!o.approve) {
    await ctx.refusals.record(
      {
        source: 'device',
        error: 'access_denied',
        reason: 'the user denied the device',
        email: user.email,
        subject: user.sub,
        clientId: found.client.clientId,
        grantType: 'urn:ietf:params:oauth:grant-type:device_code',
        requestId: x.requestId,
      },
      x.log,
    );
  }
  if (o.approve && !CONSENT_EXEMPT_CLIENTS.has(found.client.clientId)) {
    await ctx.consents.grant({
      email: user.email,
      clientId: found.client.clientId,
      clientName: found.client.name,
      services: servicesOf(found.scope),
    });
    await ctx.clients.recordApproved(found.client);
  }
  x.log.info(
    { clientId: found.client.clientId, sub: user.sub, decision: o.approve ? 'approve' : 'deny' },
    'device authorization decided',
  );
  sendPage(x.res, 200, deviceDonePage({ approved: o.approve, clientName: found.client.name }));
}
