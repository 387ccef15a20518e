import * as oidc from 'openid-client';
import { openBrowser } from './client/browser.ts';
import { type Credentials, readCredentials, writeCredentials } from './client/credentials.ts';
import { keyForLogin, tokenRequestOptions } from './client/dpop.ts';
import { CliError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import { type Callback, CallbackTimeoutError, startLoopbackListener } from './client/loopback.ts';
import { CLI_CLIENT_ID, describeOidcError, discoverIssuer } from './client/oidc.ts';
import { revokeSignIn } from './client/revoke.ts';
import { credentialsFromTokens } from './client/tokens.ts';
import type { ClientConfig } from './config.ts';

const FALLBACK_SCOPE = 'openid profile email';

/**
 * `platform login`: the command-line login sequence (RFC 8252 loopback redirect, PKCE). A loopback listener on 127.0.0.1, the static
 * client `platform-cli`, PKCE S256, `state` and `nonce`; the browser signs in and comes back with a code,
 * which is exchanged at the token endpoint found by discovery. The tokens are stored for `platform token`.
 * A sign-in they replace is revoked at its issuer afterwards, so no 30-day refresh token is left behind live
 * and unreachable; a failed login leaves the stored one as it was.
 */
export async function login(config: ClientConfig, io: Io): Promise<Credentials> {
  const server = await discoverIssuer(config.issuer, { warn: io.err, from: config.issuerFrom });
  const listener = await startLoopbackListener();
  try {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const metadata = server.serverMetadata();
    // --scope, else every scope the issuer offers: the issuer narrows it to what the user is entitled to
    // (`platform:admin` is offered, and granted only to the IdP's administrators).
    const scope = config.scope ?? (metadata.scopes_supported?.join(' ') || FALLBACK_SCOPE);
    // DPoP: a new key for this login; `dpop_jkt` binds the code to it, so only this process can redeem it.
    const dpop = await keyForLogin(config.dpop, metadata, io.err);
    const url = oidc.buildAuthorizationUrl(server, {
      ...(dpop ? { dpop_jkt: dpop.thumbprint } : {}),
      redirect_uri: listener.redirectUri,
      scope,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    io.err('Sign in with your browser. If it does not open, open this URL:');
    io.err('');
    io.err(`  ${url.href}`);
    io.err('');
    if (config.openBrowser) openBrowser(url.href, config.browserCommand);

    let callback: Callback;
    try {
      callback = await listener.next(config.loginTimeoutMs);
    } catch (err) {
      if (err instanceof CallbackTimeoutError) {
        throw new CliError('LOGIN_FAILED', `sign-in timed out: ${err.message}; run \`platform login\` again`);
      }
      throw err;
    }
    try {
      checkCallback(callback.url.searchParams, {
        state,
        issuer: metadata.issuer,
        issRequired: metadata.authorization_response_iss_parameter_supported === true,
      });
      const tokens = await oidc
        .authorizationCodeGrant(
          server,
          callback.url,
          {
            pkceCodeVerifier: verifier,
            expectedState: state,
            expectedNonce: nonce,
            idTokenExpected: scope.split(' ').includes('openid'),
          },
          undefined,
          tokenRequestOptions(server, dpop),
        )
        .catch((err: unknown) => {
          throw new CliError('LOGIN_FAILED', `the code exchange failed: ${describeOidcError(err)}`, {
            cause: err,
          });
        });
      const creds = credentialsFromTokens(tokens, { issuer: metadata.issuer, clientId: CLI_CLIENT_ID, dpop });
      const previous = await readCredentials(config.credentialsPath).catch(() => undefined);
      await writeCredentials(config.credentialsPath, creds);
      if (previous && previous.refresh_token !== creds.refresh_token) {
        await revokeSignIn(previous, io, 'the previous sign-in');
      }
      const who = tokens.claims()?.email;
      const as = typeof who === 'string' ? ` as ${who}` : '';
      callback.respond(
        true,
        `Signed in to ${metadata.issuer}${as}. You can close this tab and return to the terminal.`,
      );
      io.out(`Logged in to ${metadata.issuer}${as}.`);
      return creds;
    } catch (err) {
      const reason = err instanceof CliError ? err.message : 'an unexpected error';
      callback.respond(false, `Sign-in failed: ${reason}.\nReturn to the terminal for details.`);
      throw err;
    }
  } finally {
    await listener.close();
  }
}

/**
 * The checks made before any code is used: `state` binds the answer to this login (a forged or stale redirect
 * is refused), `iss` (RFC 9207) says which issuer answered (mix-up protection), and an `error` answer becomes
 * a readable message. openid-client repeats the state and iss checks; these give the clearer message.
 */
function checkCallback(
  params: URLSearchParams,
  expected: { state: string; issuer: string; issRequired: boolean },
): void {
  if (params.get('state') !== expected.state) {
    throw new CliError(
      'LOGIN_FAILED',
      'the browser answer does not belong to this login (state mismatch); run `platform login` again',
    );
  }
  const iss = params.get('iss');
  if (iss === null && expected.issRequired) {
    throw new CliError(
      'LOGIN_FAILED',
      `the answer does not say which issuer sent it (iss missing); sign-in refused`,
    );
  }
  if (iss !== null && iss !== expected.issuer) {
    throw new CliError(
      'LOGIN_FAILED',
      `the answer came from issuer ${iss}, not ${expected.issuer}; sign-in refused`,
    );
  }
  const error = params.get('error');
  if (error !== null) {
    const description = params.get('error_description');
    throw new CliError(
      'LOGIN_FAILED',
      `the issuer refused the sign-in: ${error}${description ? ` (${description})` : ''}`,
    );
  }
  if (!params.get('code'))
    throw new CliError('LOGIN_FAILED', 'the browser answer carries no authorization code');
}
