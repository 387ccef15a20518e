import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { authjsSessionCookies, encodeAuthjsSession } from '../../idp/session/authjs-jwt.ts';
import { ident, type Pool } from '../../lib/db.ts';
import { HttpInputError, readForm, redirect, sendText } from '../../lib/http.ts';
import type { Logger } from '../../lib/logger.ts';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface DevSignInOptions {
  pool: Pool;
  /** The IdP's issuer: the page lives on its origin and sends the browser back only there. */
  issuer: string;
  /** The web application's tables and the provider whose account id becomes the token's `sub`. */
  authjs: { usersTable: string; accountsTable: string; sessionsTable: string; subjectProvider: string };
  /** Cookie the IdP reads (the first of PLATFORM_SESSION_COOKIE's names). */
  cookieName: string;
  /**
   * `platform dev --session jwt`: the AUTH_SECRET the session is sealed under, as an Auth.js application with the
   * JWT session strategy seals it (no `sessions` row). Undefined: a database session.
   */
  jwtSecret?: string;
  /** The email the form offers (the development user). */
  suggestedEmail: string;
  /** PLATFORM_ADMIN_EMAILS as configured, shown on the page so the user knows who may administer. */
  adminEmails: string;
  log: Logger;
}

export const SIGN_IN_PATH = '/api/auth/signin';
const SESSION_SECONDS = 30 * 24 * 3600;
const EMAIL = /^[^\s@<>"]{1,64}@[^\s@<>"]{1,190}$/;

/**
 * The stand-in for the web application's sign-in (development only): anyone may claim any email. It writes the
 * same Auth.js rows the real web application writes (users, a `microsoft-entra-id` account with a stable fake
 * object id, a database session, or with `jwtSecret` a JWT-strategy session cookie instead) and sets the same
 * cookie, so the IdP runs exactly its production path.
 * Requests under /api/auth/ go here; everything else to `next` (the IdP).
 */
export function withDevSignIn(opts: DevSignInOptions, next: Handler): Handler {
  const origin = new URL(opts.issuer).origin;
  const secure = opts.issuer.startsWith('https:');
  const t = {
    users: ident(opts.authjs.usersTable),
    accounts: ident(opts.authjs.accountsTable),
    sessions: ident(opts.authjs.sessionsTable),
  };

  async function signIn(
    email: string,
  ): Promise<{ cookies: { name: string; value: string }[]; userId: string }> {
    const client = await opts.pool.connect();
    try {
      await client.query('BEGIN');
      let userId = (
        await client.query<{ id: string }>(
          `SELECT id::text FROM ${t.users} WHERE lower(email) = $1 ORDER BY id LIMIT 1`,
          [email],
        )
      ).rows[0]?.id;
      if (!userId) {
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO ${t.users} (name, email, "emailVerified") VALUES ($1, $2, now()) RETURNING id::text`,
          [email.split('@')[0], email],
        );
        userId = rows[0]!.id;
      }
      const hasAccount = await client.query(
        `SELECT 1 FROM ${t.accounts} WHERE "userId" = $1 AND provider = $2`,
        [userId, opts.authjs.subjectProvider],
      );
      if (hasAccount.rowCount === 0) {
        await client.query(
          `INSERT INTO ${t.accounts} ("userId", type, provider, "providerAccountId") VALUES ($1, 'oidc', $2, $3)`,
          [userId, opts.authjs.subjectProvider, fakeObjectId(email)],
        );
      }
      if (opts.jwtSecret !== undefined) {
        await client.query('COMMIT');
        // What Auth.js's default jwt callback puts in the token at sign-in (name, email, sub = user id), and the
        // sign-in time a well-wired application adds (README § Wiring the web application's session).
        const token = await encodeAuthjsSession({
          secret: opts.jwtSecret,
          cookieName: opts.cookieName,
          claims: { name: email.split('@')[0], email, sub: userId, auth_time: Math.floor(Date.now() / 1000) },
          maxAgeSeconds: SESSION_SECONDS,
        });
        return { cookies: authjsSessionCookies(opts.cookieName, token), userId };
      }
      const sessionToken = randomBytes(32).toString('base64url');
      await client.query(
        `INSERT INTO ${t.sessions} ("userId", expires, "sessionToken") VALUES ($1, now() + make_interval(secs => $2), $3)`,
        [userId, SESSION_SECONDS, sessionToken],
      );
      await client.query('COMMIT');
      return { cookies: [{ name: opts.cookieName, value: sessionToken }], userId };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (url.pathname !== SIGN_IN_PATH) return sendText(res, 404, 'Not found.\n');
    const page = (callbackUrl: string, problem: string) =>
      form({ callbackUrl, problem, email: opts.suggestedEmail, admins: opts.adminEmails });
    if (req.method === 'GET') return sendPage(res, 200, page(url.searchParams.get('callbackUrl') ?? '', ''));
    if (req.method !== 'POST') return sendText(res, 405, 'Method not allowed.\n', { allow: 'GET, POST' });
    // Login CSRF: another site must not be able to sign this browser in as someone else. Every IdP response
    // carries Referrer-Policy: no-referrer, under which a browser sends `Origin: null` even for this page's own
    // form; Sec-Fetch-Site (which no page can set) then says whether the post came from this origin.
    const from = req.headers.origin;
    const sameSite = from === 'null' && req.headers['sec-fetch-site'] === 'same-origin';
    if (from !== undefined && from !== origin && !sameSite)
      return sendText(res, 403, 'Cross-origin sign-in refused.\n');
    const body = await readForm(req);
    const callbackUrl = body.get('callbackUrl') ?? '';
    const email = (body.get('email') ?? '').trim().toLowerCase();
    if (!EMAIL.test(email)) return sendPage(res, 400, page(callbackUrl, 'Enter an email address.'));
    const { cookies, userId } = await signIn(email);
    opts.log.info(
      { userId, kind: opts.jwtSecret === undefined ? 'database' : 'jwt' },
      'dev sign-in: session created',
    );
    const cookie = cookies.map(
      (c) =>
        `${c.name}=${c.value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${SESSION_SECONDS}${secure ? '; Secure' : ''}`,
    );
    // One cookie, or a large JWT session's chunks (writeHead keeps headers set before it).
    res.setHeader('set-cookie', cookie);
    const back = sameOrigin(callbackUrl, origin);
    if (back) return redirect(res, back);
    return sendText(res, 200, `Signed in as ${email}.\n`, { 'cache-control': 'no-store' });
  }

  return (req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', origin);
    } catch {
      return next(req, res);
    }
    if (!url.pathname.startsWith('/api/auth/')) return next(req, res);
    handle(req, res, url).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof HttpInputError) return sendText(res, err.status, `${err.message}\n`);
      opts.log.error({ err }, 'dev sign-in failed');
      sendText(res, 500, 'Sign-in failed; see the platform dev log.\n');
    });
  };
}

/**
 * The callback only when it is on the IdP's own origin (it is the authorize URL the IdP sent here); anything
 * else would make this page an open redirect.
 */
function sameOrigin(callbackUrl: string, origin: string): string | undefined {
  if (!callbackUrl) return undefined;
  try {
    const u = new URL(callbackUrl, origin);
    return u.origin === origin ? u.href : undefined;
  } catch {
    return undefined;
  }
}

/** A stable stand-in for an Entra object id: the same email gets the same `sub` across restarts and resets. */
export function fakeObjectId(email: string): string {
  const h = createHash('sha256').update(`platform-dev:${email}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function form(p: { callbackUrl: string; problem: string; email: string; admins: string }): string {
  const { callbackUrl, problem } = p;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in (development)</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input,button{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}
.note{color:#555;font-size:.9rem}.problem{color:#b00}</style></head>
<body><h1>Sign in</h1>
<p class="note">Development sign-in standing in for the web application: any email signs in, no password.
Administrators of this stack (PLATFORM_ADMIN_EMAILS): ${escapeHtml(p.admins.split(',').join(', ')) || 'none'}.</p>
${problem ? `<p class="problem">${escapeHtml(problem)}</p>` : ''}
<form method="post" action="${SIGN_IN_PATH}">
<input type="hidden" name="callbackUrl" value="${escapeHtml(callbackUrl)}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="email" value="${escapeHtml(p.email)}" required autofocus>
<button type="submit">Sign in</button>
</form></body></html>
`;
}

function sendPage(res: ServerResponse, status: number, html: string): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    // The IdP's own responses say no-referrer; under it a browser posts this page's form with `Origin: null`,
    // and the cross-origin check below could not tell this page from another site's. same-origin keeps the
    // real Origin on our own POST and still sends nothing to other sites.
    'referrer-policy': 'same-origin',
  });
  res.end(html);
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
