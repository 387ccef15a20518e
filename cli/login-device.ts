import * as oidc from 'openid-client';
import { renderUnicodeCompact } from 'uqr';
import yoctoSpinner from 'yocto-spinner';
import { ADMIN_POWER_SCOPES } from '../lib/admin-powers.ts';
import { type Credentials, readCredentials, writeCredentials } from './client/credentials.ts';
import { keyForLogin, tokenRequestOptions } from './client/dpop.ts';
import { CliError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import { CLI_CLIENT_ID, describeOidcError, discoverIssuer, oauthErrorCode } from './client/oidc.ts';
import { revokeSignIn } from './client/revoke.ts';
import { credentialsFromTokens } from './client/tokens.ts';
import type { ClientConfig } from './config.ts';

const FALLBACK_SCOPE = 'openid profile email';

/**
 * `platform login --device`: the device authorization grant (RFC 8628) for a machine without a browser. It
 * prints the verification URL and the code (and a QR code of the URL that carries the code, for a phone),
 * then polls the token endpoint at the issuer's interval, slowing down when told to, while a spinner runs.
 * The tokens are stored like `platform login`'s, and a sign-in they replace is revoked afterwards.
 */
export async function loginWithDevice(
  config: ClientConfig,
  io: Io,
  opts: { scope?: string } = {},
): Promise<Credentials> {
  const server = await discoverIssuer(config.issuer, { warn: io.err });
  const metadata = server.serverMetadata();
  if (!metadata.device_authorization_endpoint) {
    throw new CliError(
      'LOGIN_FAILED',
      `${metadata.issuer} does not offer the device flow; use \`platform login\``,
    );
  }
  // `--scope` as the browser login takes it; else every scope the issuer offers but the administrative ones,
  // which the device flow never grants (asking for them would only put a warning on the verification page).
  const offered = metadata.scopes_supported?.filter((s) => !ADMIN_POWER_SCOPES.includes(s)).join(' ');
  const scope = opts.scope ?? config.scope ?? (offered || FALLBACK_SCOPE);
  const dpop = await keyForLogin(config.dpop, metadata, io.err);
  const start = await oidc.initiateDeviceAuthorization(server, { scope }).catch((err: unknown) => {
    throw new CliError(
      'LOGIN_FAILED',
      `the issuer refused to start the device flow: ${describeOidcError(err)}`,
      {
        cause: err,
      },
    );
  });
  io.err('To sign in, open this page on any device with a browser:');
  io.err('');
  io.err(`  ${start.verification_uri}`);
  io.err('');
  io.err(`and enter the code  ${start.user_code}`);
  if (start.verification_uri_complete) {
    io.err('');
    io.err('Or scan this code with a phone (it opens the page with the code filled in):');
    io.err('');
    io.err(renderUnicodeCompact(start.verification_uri_complete, { border: 2 }));
    io.err(`  ${start.verification_uri_complete}`);
  }
  io.err('');
  const spinner = yoctoSpinner({
    text: `Waiting for approval (the code expires in ${Math.round(start.expires_in / 60)} minutes)…`,
    stream: process.stderr,
  }).start();
  let tokens: Awaited<ReturnType<typeof oidc.pollDeviceAuthorizationGrant>>;
  try {
    tokens = await oidc.pollDeviceAuthorizationGrant(
      server,
      start,
      undefined,
      tokenRequestOptions(server, dpop),
    );
  } catch (err) {
    spinner.error('Not signed in.');
    throw new CliError('LOGIN_FAILED', deviceFailure(err), { cause: err });
  }
  spinner.success('Approved.');
  const creds = credentialsFromTokens(tokens, { issuer: metadata.issuer, clientId: CLI_CLIENT_ID, dpop });
  const previous = await readCredentials(config.credentialsPath).catch(() => undefined);
  await writeCredentials(config.credentialsPath, creds);
  if (previous && previous.refresh_token !== creds.refresh_token) {
    await revokeSignIn(previous, io, 'the previous sign-in');
  }
  const who = tokens.claims()?.email;
  io.out(`Logged in to ${metadata.issuer}${typeof who === 'string' ? ` as ${who}` : ''}.`);
  return creds;
}

function deviceFailure(err: unknown): string {
  switch (oauthErrorCode(err)) {
    case 'access_denied':
      return 'the sign-in was denied on the verification page';
    case 'expired_token':
      return 'the code expired before it was approved; run `platform login --device` again';
    default:
      if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
        return 'the code expired before it was approved; run `platform login --device` again';
      return `the device sign-in failed: ${describeOidcError(err)}`;
  }
}
