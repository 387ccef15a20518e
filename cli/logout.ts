import * as oidc from 'openid-client';
import { type Credentials, deleteCredentials, readCredentials } from './client/credentials.ts';
import { CliError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import { describeOidcError, discoverIssuer } from './client/oidc.ts';
import type { ClientConfig } from './config.ts';

/**
 * `platform logout`: revokes the stored refresh token at the issuer (RFC 7009; the issuer revokes the whole
 * grant), and the access token too while it is still valid, then deletes the file. The file goes even when the
 * issuer cannot be reached, since the user asked to be logged out here; what was not revoked is said.
 */
export async function logout(config: ClientConfig, io: Io): Promise<void> {
  let creds: Credentials | undefined;
  try {
    creds = await readCredentials(config.credentialsPath);
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    await deleteCredentials(config.credentialsPath);
    io.out(`Removed unusable credentials (${err.message}).`);
    return;
  }
  if (!creds) {
    io.out('Not logged in.');
    return;
  }
  try {
    const server = await discoverIssuer(creds.issuer, { clientId: creds.client_id, warn: io.err });
    await oidc.tokenRevocation(server, creds.refresh_token, { token_type_hint: 'refresh_token' });
    if (creds.expires_at > Date.now() / 1000) {
      // Best effort: the grant is already revoked; this also puts the access token on the gateway's denylist.
      await oidc
        .tokenRevocation(server, creds.access_token, { token_type_hint: 'access_token' })
        .catch((err) => {
          io.err(
            `warning: the access token was not revoked (${describeOidcError(err)}); it expires within the hour`,
          );
        });
    }
  } catch (err) {
    const reason = err instanceof CliError ? err.message : describeOidcError(err);
    io.err(
      `warning: could not revoke the sign-in at ${creds.issuer} (${reason}); it stays valid until it expires`,
    );
  }
  await deleteCredentials(config.credentialsPath);
  io.out(`Logged out of ${creds.issuer}.`);
}
