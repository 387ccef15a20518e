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
const signature = (ctx: IdpContext, at: number, clientId: string) =>
  createHmac('sha256', markerKey(ctx)).update(`${at}\n${clientId}`).digest('base64url');

/** `<unix seconds>.<HMAC of the time and the client id>` under a key derived from the signing key. */
export function signInMarker(ctx: IdpContext, clientId: string, at: number): string {
  return `${at}.${signature(ctx, at, clientId)}`;
}

/**
 * Removes the marker from the request's parameters and returns the time it names when it is this provider's,
 * for this client, and recent; undefined otherwise (absent, forged, another client's, expired).
 */
export function takeSignInMarker(
  ctx: IdpContext,
  params: Map<string, string>,
  clientId: string,
  now: number,
): number | undefined {
  const value = params.get(SIGN_IN_MARKER);
  params.delete(SIGN_IN_MARKER);
  const m = value === undefined ? null : /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(value);
  if (!m) return undefined;
  const at = Number(m[1]);
  const expected = Buffer.from(signature(ctx, at, clientId));
  const given = Buffer.from(m[2]!);
  if (!timingSafeEqual(expected, given)) return undefined;
  if (at > now + 60 || now - at > MARKER_TTL_SECONDS) return undefined;
  return at;
}

export type Freshness = 'fresh' | 'sign-in' | 'not-signed-in-again';

/**
 * Whether the session's sign-in satisfies the request: `sign-in` (send the browser to sign in) when prompt=login,
 * max_age=0, max_age exceeded, or max_age with a sign-in time that is not known exactly; after the return
 * (`startedAt`, the marker's time) a session recorded at or after it is fresh, an older one is not.
 */
export function freshness(
  request: { prompt: ReadonlySet<string>; maxAge: number | undefined },
  signIn: SignIn,
  startedAt: number | undefined,
  now: number,
): Freshness {
  const again = request.prompt.has('login') || request.maxAge === 0;
  const tooOld = request.maxAge !== undefined && (!signIn.known || now - signIn.authTime > request.maxAge);
  if (!again && !tooOld) return 'fresh';
  if (startedAt === undefined) return 'sign-in';
  return signIn.authTime >= startedAt ? 'fresh' : 'not-signed-in-again';
}
