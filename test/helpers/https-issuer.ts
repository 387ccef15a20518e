// A real `platform idp` behind an https reverse proxy (the test CA's certificate for `localhost`), so the issuer is
// `https://localhost:<port>` as in production, and a browser for it: a cookie for the IdP's origin, the web
// application's sign-in page played by the test (a new Auth.js session, as the web application makes), the consent
// page answered through its own form. The CA is trusted by this test process only (tls.setDefaultCACertificates).
import { request as httpRequest } from 'node:http';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import type pg from 'pg';
import { addSession, type SeededUser } from './database.ts';
import { answerConsent, parseConsentForm } from './oauth.ts';
import { type IdpProcess, startIdpProcess } from './processes.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from './tls.ts';

export interface HttpsIssuer {
  /** `https://localhost:<port>`: the IdP's configured issuer, served by the proxy. */
  issuer: string;
  idp: IdpProcess;
  ca: TestCa;
  close(): Promise<void>;
}

export async function startHttpsIssuer(o: {
  databaseUrl: string;
  redisUrl: string;
  env?: Record<string, string>;
}): Promise<HttpsIssuer> {
  const ca = await createTestCa();
  setDefaultCACertificates([...getCACertificates('default'), ca.ca]);
  let upstream = '';
  const proxy: TestHttpsServer = await startHttpsServer(ca, (req, res) => {
    const forward = httpRequest(
      `${upstream}${req.url}`,
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forward.on('error', () => res.writeHead(502).end());
    req.pipe(forward);
  });
  const issuer = `https://localhost:${proxy.port}`;
  const idp = await startIdpProcess({
    databaseUrl: o.databaseUrl,
    redisUrl: o.redisUrl,
    env: { PLATFORM_OIDC_ISSUER: issuer, ...o.env },
  });
  upstream = idp.url;
  return {
    issuer,
    idp,
    ca,
    async close() {
      await idp.stop();
      await proxy.close();
      await ca.cleanup();
    },
  };
}

export type BrowserOutcome =
  | { kind: 'callback'; url: URL }
  | { kind: 'page'; status: number; body: string; headers: Headers };

/**
 * One user's browser. `open(url)` follows redirects as a browser would: the session cookie goes to the issuer's
 * origin; the sign-in page (`{issuer}/api/auth/signin`) signs the user in anew and returns to its `callbackUrl`;
 * a consent page is answered; it stops at the first address off the issuer (the client's redirect URI) or at a
 * page that is not the consent page. With `method: 'POST'` the first request is a form POST of `start`'s query to
 * its path (an authorization request sent by POST, OIDC Core §3.1.2.1); every redirect after it is a GET.
 */
export class Browser {
  sessionToken: string | undefined;
  /** Every sign-in page the browser was sent to (ExpectSecondLoginPage). */
  readonly signInPages: URL[] = [];
  readonly cookieName = '__Secure-authjs.session-token';

  private readonly issuer: string;
  private readonly pool: pg.Pool;
  readonly user: SeededUser;
  private readonly consent: 'approve' | 'deny';

  constructor(issuer: string, pool: pg.Pool, user: SeededUser, consent: 'approve' | 'deny' = 'approve') {
    this.issuer = issuer;
    this.pool = pool;
    this.user = user;
    this.consent = consent;
  }

  async open(start: URL | string, o: { method?: 'GET' | 'POST' } = {}): Promise<BrowserOutcome> {
    let url = new URL(start);
    let post = o.method === 'POST';
    const origin = new URL(this.issuer).origin;
    for (let hops = 0; hops < 10; hops++) {
      if (url.origin !== origin) return { kind: 'callback', url };
      if (url.pathname === '/api/auth/signin') {
        this.signInPages.push(url);
        this.sessionToken = await addSession(this.pool, this.user.id);
        url = new URL(url.searchParams.get('callbackUrl')!, origin);
        continue;
      }
      const cookie: Record<string, string> = this.sessionToken
        ? { cookie: `${this.cookieName}=${this.sessionToken}` }
        : {};
      const res = post
        ? await fetch(new URL(url.pathname, url), {
            method: 'POST',
            redirect: 'manual',
            body: url.searchParams,
            headers: { ...cookie, 'content-type': 'application/x-www-form-urlencoded' },
          })
        : await fetch(url, { redirect: 'manual', headers: cookie });
      post = false;
      const body = await res.text();
      let location = res.headers.get('location');
      if (res.status === 200 && this.sessionToken && parseConsentForm(body)) {
        const answer = await answerConsent({
          url: url.toString(),
          html: body,
          sessionToken: this.sessionToken,
          cookieName: this.cookieName,
          decision: this.consent,
        });
        location = answer.res.headers.get('location');
        if (!location)
          return { kind: 'page', status: answer.status, body: answer.body, headers: answer.res.headers };
      }
      if (!location) return { kind: 'page', status: res.status, body, headers: res.headers };
      url = new URL(location, url);
    }
    throw new Error(`too many redirects, last ${url}`);
  }
}
