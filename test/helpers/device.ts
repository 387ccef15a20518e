// The device authorization grant (RFC 8628) as its two parties drive it over HTTP: the device starts it and
// polls, a signed-in person opens the verification page and answers its form.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { answerConsent, type DeviceStart, sessionCookieName } from './oauth.ts';

// Starting the flow and polling are test/helpers/oauth.ts's (the sign-in helpers use them too).
export { DEVICE_GRANT, type DeviceStart, pollDevice, startDevice } from './oauth.ts';

/** Lets the next poll through without waiting out the interval (the clock, not the rule, is moved). */
export function skipPollInterval(pool: pg.Pool, deviceCode: string) {
  return pool.query(
    `UPDATE platform.device_codes SET last_polled_at = now() - interval '1 hour' WHERE device_code_hash = $1`,
    [createHash('sha256').update(deviceCode).digest('base64url')],
  );
}

/** GET a verification page URL as the signed-in person (no redirects followed). */
export async function openDevicePage(issuer: string, url: string, sessionToken: string) {
  const res = await fetch(url, {
    redirect: 'manual',
    headers: { cookie: `${sessionCookieName(issuer)}=${sessionToken}` },
  });
  return { res, status: res.status, body: await res.text() };
}

/** The person opens `verification_uri_complete` and answers the page's own form (with its CSRF token). */
export async function answerDevicePage(
  issuer: string,
  d: DeviceStart,
  sessionToken: string,
  decision: 'approve' | 'deny',
) {
  const page = await openDevicePage(issuer, d.verification_uri_complete, sessionToken);
  if (page.status !== 200) throw new Error(`verification page: ${page.status} ${page.body.slice(0, 300)}`);
  const answer = await answerConsent({
    url: d.verification_uri_complete,
    html: page.body,
    sessionToken,
    cookieName: sessionCookieName(issuer),
    decision,
  });
  return { page: page.body, ...answer };
}

export interface ScopeItem {
  /** What the page says, in words. */
  words: string;
  /** The scope names shown under the words. */
  scopes: string[];
}

/**
 * The scope lists of a consent or verification page, unescaped: `granted` (what the client or device will
 * receive) and `withheld` (asked for, never given).
 */
export function pageScopes(html: string): { granted: ScopeItem[]; withheld: ScopeItem[] } {
  const decode = (v: string) => v.replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)));
  const items = (list: string | undefined): ScopeItem[] =>
    [...(list ?? '').matchAll(/<span class="name">([^<]*)<\/span><span class="scope">([^<]*)<\/span>/g)].map(
      (m) => ({ words: decode(m[1]!), scopes: decode(m[2]!).split(' ') }),
    );
  return {
    granted: items(/<ul class="services">([\s\S]*?)<\/ul>/.exec(html)?.[1]),
    withheld: items(/<ul class="services withheld">([\s\S]*?)<\/ul>/.exec(html)?.[1]),
  };
}
