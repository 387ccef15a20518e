// OpenID Connect login freshness (OIDC Core §3.1.2.1; docs/idp.md § Login freshness): prompt=login and max_age
// send the browser to the sign-in page again, and the sign-in time (auth_time) is the one the provider recorded
// for the session (store/sessions.ts). The authorization request sent to sign in carries a signed marker with the
// time it left, so its return is recognised: a session first seen after that time signed in after it; the same
// (older) session coming back means the web application did not sign the user in again.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IdpContext } from '../context.ts';
import type { SignIn } from '../store/sessions.ts';

/** The marker's parameter on the authorization request the sign-in page returns to. */
export const SIGN_IN_MARKER = 'platform_sign_in';
/** A marker older than this is ignored (the browser is sent to sign in again). */
export const MARKER_TTL_SECONDS = 600;

const markerKey = (ctx: IdpContext) => createHmac('sha256', ctx.csrfKey).update('sign-in marker v1').digest();
const mac = (ctx: IdpContext, text: string) =>
  createHmac('sha256', markerKey(ctx)).update(text).digest('base64url');
/** Names the session the browser had when it left (keyed, so the URL carries nothing linkable to the token). */
const sessionTag = (ctx: IdpContext, sessionToken: string | undefined) =>
  sessionToken === undefined ? '-' : mac(ctx, `session\n${sessionToken}`).slice(0, 22);

/** `<unix seconds>.<session tag>.<HMAC of both and the client id>`, keyed from the signing key. */
export function signInMarker(
  ctx: IdpContext,
  o: { clientId: string; at: number; sessionToken: string | undefined },
): string {
  const tag = sessionTag(ctx, o.sessionToken);
  return `${o.at}.${tag}.${mac(ctx, `${o.at}\n${tag}\n${o.clientId}`)}`;
}

/** A return from the sign-in page: when the browser left, and whether it came back with the session it left with. */
export interface SignInReturn {
  startedAt: number;
  sameSession: boolean;
  /** The browser left without any session: the one it came back with is a sign-in made since. */
  leftWithoutSession: boolean;
}

/**
 * Removes the marker from the request's parameters and reads it when it is this provider's, for this client, and
 * recent; undefined otherwise (absent, forged, another client's, expired).
 */
export function takeSignInMarker(
  ctx: IdpContext,
  params: Map<string, string>,
  o: { clientId: string; sessionToken: string | undefined; now: number },
): SignInReturn | undefined {
  const value = params.get(SIGN_IN_MARKER);
  params.delete(SIGN_IN_MARKER);
  const m =
    value === undefined ? null : /^(\d{1,12})\.(-|[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value);
  if (!m) return undefined;
  const [, at, tag, sig] = m as unknown as [string, string, string, string];
  const expected = Buffer.from(mac(ctx, `${at}\n${tag}\n${o.clientId}`));
  if (!timingSafeEqual(expected, Buffer.from(sig))) return undefined;
  const startedAt = Number(at);
  if (startedAt > o.now + 60 || o.now - startedAt > MARKER_TTL_SECONDS) return undefined;
  return { startedAt, sameSession: tag === sessionTag(ctx, o.sessionToken), leftWithoutSession: tag === '-' };
}

export type Freshness = 'fresh' | 'sign-in' | 'not-signed-in-again';

/**
 * Whether the session's sign-in satisfies the request: `sign-in` (send the browser to sign in) when prompt=login,
 * max_age=0, max_age exceeded, or max_age with a sign-in time that is not known exactly. Back from the sign-in
 * page, a session other than the one the browser left with, first seen since it left, signed in since: fresh;
 * anything else did not sign in again (so does a session whose sign-ins cannot be observed).
 */
export function freshness(
  request: { prompt: ReadonlySet<string>; maxAge: number | undefined },
  signIn: SignIn,
  back: SignInReturn | undefined,
  now: number,
): Freshness {
  const again = request.prompt.has('login') || request.maxAge === 0;
  const tooOld = request.maxAge !== undefined && (!signIn.known || now - signIn.authTime > request.maxAge);
  if (!again && !tooOld) return 'fresh';
  if (back === undefined) return 'sign-in';
  // Back with a session after leaving with one, but nothing can tell a new sign-in from the same session
  // re-issued (SignIn.observable).
  if (signIn.observable === false && !back.leftWithoutSession) return 'not-signed-in-again';
  return !back.sameSession && signIn.authTime >= back.startedAt ? 'fresh' : 'not-signed-in-again';
}
