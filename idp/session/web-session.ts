// The web application's session as the provider sees it: the one configured cookie, its user, when that user
// signed in, and where a browser without one is sent to sign in. Shared by authorize, the consent form, the
// device page and the console.
import { parseCookies } from '../../lib/http.ts';
import type { Exchange, IdpContext } from '../context.ts';
import type { SessionUser, SignIn } from '../store/sessions.ts';

/** The web session behind a request: the one cookie the configuration names, its user and sign-in. */
export interface WebSession {
  token: string;
  user: SessionUser;
  signIn: SignIn;
}

/** The session cookie's value: only the one configured name is read (an https issuer reads only __Secure-). */
export function sessionCookie(ctx: IdpContext, x: Exchange): string | undefined {
  return parseCookies(x.req.headers.cookie).get(ctx.config.sessionCookie) || undefined;
}

/**
 * The session and its user; only the one configured cookie is read (an https issuer reads only the __Secure- name). `returningFromSignIn`:
 * the request came back from the sign-in page this provider sent it to (a session first seen now signed in now).
 */
export async function webSession(
  ctx: IdpContext,
  x: Exchange,
  o: { returningFromSignIn?: boolean } = {},
): Promise<WebSession | undefined> {
  const token = sessionCookie(ctx, x);
  if (!token) return undefined;
  const found = await ctx.sessions.findBySessionToken(token, o);
  return found ? { token, ...found } : undefined;
}

/** PLATFORM_LOGIN_URL with `callbackUrl` = this request's URL on the issuer (with `extra` parameters set). */
export function loginRedirect(ctx: IdpContext, url: URL, extra: Record<string, string> = {}): string {
  const back = new URL(`${ctx.config.issuer}${url.pathname}${url.search}`);
  for (const [k, v] of Object.entries(extra)) back.searchParams.set(k, v);
  const login = new URL(ctx.config.loginUrl);
  login.searchParams.set('callbackUrl', back.toString());
  return login.toString();
}
