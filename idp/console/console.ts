// The console's edge: who may see it (a web session of an administrator), the checks every form post passes
// (same origin, the CSRF token of this session), the post/redirect/get answer with its signed flash line,
// and errors as pages. Every read and action goes through the admin API's handlers (admin/router.ts runAdmin).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { HttpInputError, readForm, redirect } from '../../lib/http.ts';
import type { AdminIdentity } from '../admin/auth.ts';
import {
  type AdminResult,
  type CompiledPath,
  checkQuery,
  compilePath,
  matchRoute,
} from '../admin/route-table.ts';
import { runAdmin } from '../admin/router.ts';
import { csrfToken, csrfTokenValid } from '../consent.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { OAuthError } from '../errors.ts';
import { loginRedirect, type WebSession, webSession } from '../session/web-session.ts';
import { type Flash, problemPage, sendConsolePage } from './layout.ts';

/** The client id the admin audit records for actions taken in the console (there is no token). */
export const CONSOLE_CLIENT_ID = 'admin-console';
/** The CSRF token's subject: a newline, which no client id holds, keeps it apart from consent-form tokens. */
const CSRF_SUBJECT = 'admin-console\n';

export interface ConsoleRequest {
  ctx: IdpContext;
  x: Exchange;
  admin: AdminIdentity;
  session: WebSession;
  params: Readonly<Record<string, string>>;
  /** The posted form (without csrf_token); empty for GET. */
  form: ReadonlyMap<string, string>;
  /** The token every form of the page carries. */
  csrf: string;
  /** The flash line a redirect after a post asked for, when its signature holds. */
  flash: Flash | undefined;
  /** Runs an admin API route as this administrator (its handler, its audit row) and returns its JSON body. */
  api<T>(method: 'GET' | 'POST' | 'DELETE', path: string, o?: ApiInput): Promise<T>;
  /** Runs an admin API route that writes the response itself (the exports). */
  stream(path: string, query: URLSearchParams): Promise<void>;
  /** Post/redirect/get: 303 to `path` with a signed flash line. */
  done(path: string, flash: Flash): void;
}

export interface ApiInput {
  query?: URLSearchParams | Record<string, string | undefined>;
  body?: Record<string, unknown>;
}

export type ConsoleHandler = (r: ConsoleRequest) => Promise<void>;

export interface ConsoleRoute {
  method: 'GET' | 'POST';
  path: string;
  handler: ConsoleHandler;
}

function toParams(q: ApiInput['query']): URLSearchParams {
  if (q instanceof URLSearchParams) return q;
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(q ?? {})) if (v !== undefined && v !== '') out.set(k, v);
  return out;
}

function flashSignature(ctx: IdpContext, session: WebSession, f: Flash): string {
  return createHmac('sha256', ctx.csrfKey)
    .update(`console-flash\n${session.token}\n${f.kind}\n${f.text}`)
    .digest('base64url');
}

/** The flash line of the query, only when the server signed it for this session (no text injected by a link). */
function readFlash(ctx: IdpContext, session: WebSession, url: URL): Flash | undefined {
  const text = url.searchParams.get('flash');
  const kind = url.searchParams.get('kind') === 'error' ? 'error' : 'ok';
  const sig = url.searchParams.get('sig') ?? '';
  if (!text || text.length > 500) return undefined;
  const expected = Buffer.from(flashSignature(ctx, session, { kind, text }));
  const given = Buffer.from(sig);
  return given.length === expected.length && timingSafeEqual(given, expected) ? { kind, text } : undefined;
}

/**
 * A form post must come from a page of this origin: `Sec-Fetch-Site: same-origin` when the browser sends it,
 * else an `Origin` equal to the issuer's (a page with `Referrer-Policy: no-referrer` posts `Origin: null`,
 * which is then judged by the CSRF token alone).
 */
function sameOrigin(ctx: IdpContext, x: Exchange): boolean {
  const site = x.req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin';
  const origin = x.req.headers.origin;
  if (typeof origin !== 'string' || origin === 'null') return true;
  return origin === new URL(ctx.config.issuer).origin;
}

/**
 * The console's mount (`/admin` and everything under `/admin/` but the API): a web session (else the sign-in
 * page, which returns here), an administrator's (else a 403 page), then the route; a post also needs the same
 * origin and this session's CSRF token (else 403, nothing done). 4xx errors are pages; 5xx go to app.ts.
 */
export function consoleMount(routes: readonly ConsoleRoute[]): Endpoint {
  const table = routes.map((r) => ({ ...r, ...compilePath(r.path) }) as ConsoleRoute & CompiledPath);
  return async (ctx, x) => {
    let email: string | undefined;
    try {
      const session = await webSession(ctx, x);
      if (!session) {
        if (x.req.method === 'GET' || x.req.method === 'HEAD')
          return redirect(x.res, loginRedirect(ctx, x.url));
        throw new ConsoleProblem(403, 'Your sign-in session has ended. Sign in again and retry.');
      }
      if (!ctx.config.adminEmails.has(session.user.email)) {
        x.log.warn({ email: session.user.email }, 'console refused: not an administrator');
        throw new ConsoleProblem(
          403,
          `You are signed in as ${session.user.email}, who is not one of the platform's administrators.`,
        );
      }
      email = session.user.email;
      checkQuery(x.url.searchParams);
      const { route, params } = matchRoute(
        table,
        x.req.method === 'HEAD' ? 'GET' : (x.req.method ?? ''),
        x.url.pathname,
      );
      const csrf = csrfToken(ctx.csrfKey, session.token, CSRF_SUBJECT);
      let form: Map<string, string> = new Map();
      if (route.method === 'POST') {
        if (!sameOrigin(ctx, x)) {
          x.log.warn({ path: x.url.pathname }, 'console form refused: not posted from this origin');
          throw new ConsoleProblem(403, 'The form was not sent from this console. Nothing was changed.');
        }
        form = await readForm(x.req, 16 * 1024);
        const given = form.get('csrf_token') ?? '';
        form.delete('csrf_token');
        if (!csrfTokenValid(ctx.csrfKey, session.token, CSRF_SUBJECT, given)) {
          x.log.warn({ path: x.url.pathname }, 'console form refused: CSRF token does not match the session');
          throw new ConsoleProblem(
            403,
            'The form is not valid for this session (it may be from an older sign-in). Nothing was changed; reload the page and retry.',
          );
        }
      }
      const admin: AdminIdentity = {
        email: session.user.email,
        sub: session.user.sub,
        clientId: CONSOLE_CLIENT_ID,
        jti: null,
      };
      const call = async (method: string, path: string, o: ApiInput = {}): Promise<AdminResult> =>
        runAdmin(ctx, x, admin, {
          method,
          path,
          query: toParams(o.query),
          body: async () => o.body ?? {},
        });
      await route.handler({
        ctx,
        x,
        admin,
        session,
        params,
        form,
        csrf,
        flash: readFlash(ctx, session, x.url),
        async api<T>(method: 'GET' | 'POST' | 'DELETE', path: string, o?: ApiInput) {
          const r = await call(method, path, o);
          return ('body' in r ? r.body : undefined) as T;
        },
        async stream(path, query) {
          await call('GET', path, { query });
        },
        done(path, flash) {
          const u = new URL(path, 'http://console.invalid');
          u.searchParams.set('flash', flash.text.slice(0, 500));
          if (flash.kind === 'error') u.searchParams.set('kind', 'error');
          u.searchParams.set(
            'sig',
            flashSignature(ctx, session, { kind: flash.kind, text: flash.text.slice(0, 500) }),
          );
          x.res.writeHead(303, {
            location: `${u.pathname}${u.search}`,
            'cache-control': 'no-store',
            'content-length': 0,
          });
          x.res.end();
        },
      });
    } catch (err) {
      if (x.res.headersSent) throw err;
      const problem =
        err instanceof ConsoleProblem
          ? err
          : err instanceof OAuthError && err.status < 500
            ? new ConsoleProblem(err.status, err.message)
            : err instanceof HttpInputError
              ? new ConsoleProblem(err.status, err.message)
              : undefined;
      if (!problem) throw err;
      if (problem.status !== 403)
        x.log.warn({ status: problem.status, reason: problem.message }, 'console request refused');
      if (problem.status === 405) x.res.setHeader('allow', 'GET, POST');
      sendConsolePage(
        x.res,
        problem.status,
        problemPage({ status: problem.status, message: problem.message, email }),
      );
    }
  };
}

/** A refused console request, shown as a page with this status. */
export class ConsoleProblem extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'ConsoleProblem';
    this.status = status;
  }
}

/**
 * Runs an action of a form post; a 4xx from the admin API comes back to `back` as an error flash line (the
 * post/redirect/get pattern holds for refusals too), anything else propagates.
 */
export async function act(r: ConsoleRequest, back: string, action: () => Promise<string>): Promise<void> {
  let text: string;
  try {
    text = await action();
  } catch (err) {
    if (!(err instanceof OAuthError) || err.status >= 500) throw err;
    return r.done(back, { kind: 'error', text: err.message });
  }
  r.done(back, { kind: 'ok', text });
}
