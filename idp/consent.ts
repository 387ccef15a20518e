// Consent: which clients need it, whether the stored consent covers a request, the page, and the CSRF token
// that binds the page's form to the web session that was shown it.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { FIRST_PARTY_CLIENT } from '../lib/admin-powers.ts';
import type { Exchange, IdpContext } from './context.ts';
import { consentPage } from './pages/consent.ts';
import { sendPage } from './pages/html.ts';
import { isLoopbackRedirect } from './redirect-uris.ts';
import { powersOf } from './scopes.ts';
import type { WebSession } from './session/web-session.ts';
import type { Client } from './store/clients.ts';

/** The first-party command-line client is the only one that never asks. */
export const CONSENT_EXEMPT_CLIENTS: ReadonlySet<string> = new Set([FIRST_PARTY_CLIENT]);

export function servicesOf(scope: string): string[] {
  return scope
    .split(' ')
    .filter((s) => s.startsWith('mcp:'))
    .map((s) => s.slice(4));
}

/**
 * True when the page must be shown: prompt=consent, no stored consent, or a service or an administrative scope
 * (mail:send_as) not yet approved.
 */
export async function needsConsent(
  ctx: IdpContext,
  q: { client: Client; email: string; scope: string; prompt: ReadonlySet<string> },
): Promise<boolean> {
  if (CONSENT_EXEMPT_CLIENTS.has(q.client.clientId)) return false;
  if (q.prompt.has('consent')) return true;
  const stored = await ctx.consents.find({ email: q.email, clientId: q.client.clientId });
  if (!stored) return true;
  const approved = new Set(stored.services);
  const powers = new Set(stored.scopes);
  return servicesOf(q.scope).some((s) => !approved.has(s)) || powersOf(q.scope).some((s) => !powers.has(s));
}

/**
 * What the page names as the client's home: its metadata document's host when it has one, else where its
 * redirect URI leads (a loopback port on this computer, a private-use scheme's app, or a web host).
 */
export function consentHost(
  client: Client,
  redirectUri: string,
): { value: string; kind: 'redirect' | 'loopback' | 'app' | 'metadata' } {
  if (client.metadataDocumentUrl)
    return { value: new URL(client.metadataDocumentUrl).host, kind: 'metadata' };
  const u = new URL(redirectUri);
  if (isLoopbackRedirect(redirectUri)) return { value: u.host, kind: 'loopback' };
  if (u.protocol === 'https:' || u.protocol === 'http:') return { value: u.host, kind: 'redirect' };
  return { value: `${u.protocol}//${u.host}`, kind: 'app' };
}

/**
 * The form's CSRF token: HMAC of the session token and the client id under a key only the provider holds.
 * Another session's page, another client's page, or a forged form carries a token that does not verify.
 */
export function csrfToken(key: Buffer, sessionToken: string, clientId: string): string {
  return createHmac('sha256', key).update(`consent\n${sessionToken}\n${clientId}`).digest('base64url');
}

export function csrfTokenValid(key: Buffer, sessionToken: string, clientId: string, given: string): boolean {
  const expected = Buffer.from(csrfToken(key, sessionToken, clientId));
  const got = Buffer.from(given);
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/**
 * The form field carrying the administrative scopes the page named: the approval grants no other power, even
 * if the user became an administrator between seeing the page and answering it.
 */
export const POWERS_NAMED_FIELD = 'powers_named';

/**
 * The fields only the consent form carries. A POST to /oauth/authorize with any of them is an answer to the page
 * (its CSRF token is then required); one with none of them is an authorization request, handled as a GET.
 */
export const CONSENT_FORM_FIELDS: readonly string[] = ['decision', 'csrf_token', POWERS_NAMED_FIELD];

/** Where the decision's redirect goes, as a CSP source: the redirect URI's origin, or its scheme. */
function formTarget(redirectUri: string): string {
  const u = new URL(redirectUri);
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : u.protocol;
}

export function renderConsent(
  ctx: IdpContext,
  x: Exchange,
  o: {
    client: Client;
    redirectUri: string;
    session: WebSession;
    scope: string;
    params: ReadonlyMap<string, string>;
  },
): void {
  const document = consentPage({
    clientId: o.client.clientId,
    clientName: o.client.name,
    host: consentHost(o.client, o.redirectUri),
    email: o.session.user.email,
    scope: o.scope,
    params: new Map([...o.params, [POWERS_NAMED_FIELD, powersOf(o.scope).join(' ')]]),
    csrfToken: csrfToken(ctx.csrfKey, o.session.token, o.client.clientId),
  });
  x.log.info({ clientId: o.client.clientId }, 'consent asked');
  sendPage(x.res, 200, document, { formTargets: [formTarget(o.redirectUri)] });
}
