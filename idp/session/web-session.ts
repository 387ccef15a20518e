// The web application's session as the provider sees it: the one configured cookie, its user, and where a
// browser without one is sent to sign in. Shared by authorize, the consent form, the device page and the console.
import { parseCookies } from '../../lib/http.ts';
import type { Exchange, IdpContext } from '../context.ts';
import type { SessionUser } from '../store/sessions.ts';

/** The web session behind a request: the one cookie the configuration names, and its user. */
export interface WebSession {
  token: string;
  user: SessionUser;
}

/** Only the one configured cookie is read (an https issuer reads only the __Secure- name). */
export async function webSession(ctx: IdpContext, x: Exchange): Promise<WebSession | undefined> {
  const token = parseCookies(x.req.headers.cookie).get(ctx.config.sessionCookie);
  if (!token) return undefined;
  const user = await ctx.sessions.findBySessionToken(token);
  return user ? { token, user } : undefined;
}

/** PLATFORM_LOGIN_URL with `callbackUrl` = this request's URL on the issuer. */
export function loginRedirect(ctx: IdpContext, url: URL): string {
  const back = `${ctx.config.issuer}${url.pathname}${url.search}`;
  const login = new URL(ctx.config.loginUrl);
  login.searchParams.set('callbackUrl', back);
  return login.toString();
}
