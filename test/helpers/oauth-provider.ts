// The MCP SDK v2 client's OAuthClientProvider, kept in memory, as the interop tests drive it: what the SDK stores
// (client information, tokens, verifier, discovery state) and a "browser" that is a fetch carrying the user's
// web session, approving the consent page when the IdP shows one and stopping at the callback.
import { randomBytes } from 'node:crypto';
import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  OAuthTokens,
  StoredOAuthClientInformation,
} from '@modelcontextprotocol/client';
import { answerConsent } from './oauth.ts';

/** What one trip through the authorization endpoint showed. */
export interface BrowserVisit {
  /** The callback the IdP redirected to (its `state` already checked). */
  callback: URL;
  /** The consent page's HTML when one was shown (and approved); undefined when the IdP redirected at once. */
  consentPage: string | undefined;
}

export abstract class InMemoryOAuthProvider implements OAuthClientProvider {
  abstract readonly redirectUrl: string;
  abstract get clientMetadata(): OAuthClientMetadata;
  info: StoredOAuthClientInformation | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  private discovery: OAuthDiscoveryState | undefined;
  protected readonly expectedState = randomBytes(16).toString('hex');

  state() {
    return this.expectedState;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
  abstract redirectToAuthorization(url: URL): Promise<void>;

  /** Opens `url` with the web-session cookie, approves a consent page if one is shown, checks the state. */
  protected async visit(
    url: URL,
    session: { cookieName: string; sessionToken: string },
  ): Promise<BrowserVisit> {
    const res = await fetch(url, {
      redirect: 'manual',
      headers: { cookie: `${session.cookieName}=${session.sessionToken}` },
    });
    let status = res.status;
    let location = res.headers.get('location');
    let consentPage: string | undefined;
    if (status === 200) {
      consentPage = await res.text();
      const answer = await answerConsent({
        url: url.href,
        html: consentPage,
        ...session,
        decision: 'approve',
      });
      status = answer.status;
      location = answer.location?.href ?? null;
    }
    if (status !== 302 || !location) throw new Error(`authorize answered ${status}: ${consentPage ?? ''}`);
    const callback = new URL(location);
    if (callback.searchParams.get('state') !== this.expectedState) throw new Error('state mismatch');
    return { callback, consentPage };
  }
}

/** Who the browser is: the web session's cookie name and token (a replay stack's `browserSession()`). */
export type BrowserSession = { cookieName: string; sessionToken: string };

/**
 * A provider whose browser is a signed-in user: it registers `metadata`, and its redirect to the authorization
 * endpoint is a visit with `session()`'s cookie (consent approved), remembering the callback and consent page.
 */
export class SignedInProvider extends InMemoryOAuthProvider {
  callback: URL | undefined;
  consentPage: string | undefined;
  readonly redirectUrl: string;
  private readonly metadata: OAuthClientMetadata;
  private readonly browser: () => BrowserSession;
  constructor(redirectUrl: string, metadata: OAuthClientMetadata, browser: () => BrowserSession) {
    super();
    this.redirectUrl = redirectUrl;
    this.metadata = metadata;
    this.browser = browser;
  }
  get clientMetadata(): OAuthClientMetadata {
    return this.metadata;
  }
  async redirectToAuthorization(url: URL) {
    const visit = await this.visit(url, this.browser());
    this.callback = visit.callback;
    this.consentPage = visit.consentPage;
  }
}
