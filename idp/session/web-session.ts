// The web application's session as the provider sees it: the one configured cookie, its user, when that user
// signed in, and where a browser without one is sent to sign in. Shared by authorize, the consent form, the
// device page, the connections pages and the console. The cookie holds an Auth.js database session's token or,
// with PLATFORM_AUTHJS_SECRET, an Auth.js JWT-strategy session (authjs-jwt.ts); either counts.
import { parseCookies } from '../../lib/http.ts';
import type { IdpConfig } from '../config.ts';
import type { Exchange, IdpContext } from '../context.ts';
import type { SessionUser, SignIn } from '../store/sessions.ts';
import { type AuthjsSessionReader, createAuthjsSessionReader } from './authjs-jwt.ts';

/** The web session behind a request: the one cookie the configuration names, its user and sign-in. */
export interface WebSession {
  token: string;
  user: SessionUser;
  signIn: SignIn;
}

/** One reader per configuration: its keys are derived once (none without PLATFORM_AUTHJS_SECRET). */
const readers = new WeakMap<IdpConfig, AuthjsSessionReader>();
function jwtReader(config: IdpConfig): AuthjsSessionReader | undefined {
  if (config.authjsSecrets.length === 0) return undefined;
  let reader = readers.get(config);
  if (!reader) {
    reader = createAuthjsSessionReader(config.authjsSecrets, config.sessionCookie);
    readers.set(config, reader);
  }
  return reader;
}

/**
 * The session cookie's value: only the one configured name is read (an https issuer reads only __Secure-); with
 * PLATFORM_AUTHJS_SECRET, Auth.js's chunks of it (`<name>.0`, `<name>.1`, …) reassembled.
 */
export function sessionCookie(ctx: IdpContext, x: Exchange): string | undefined {
  const cookies = parseCookies(x.req.headers.cookie);
  const reader = jwtReader(ctx.config);
  return reader ? reader.value(cookies) : cookies.get(ctx.config.sessionCookie) || undefined;
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
  const jwt = await jwtReader(ctx.config)?.decode(token);
  const found = jwt
    ? await ctx.sessions.findByJwtSession(jwt, token)
    : await ctx.sessions.findBySessionToken(token, o);
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
