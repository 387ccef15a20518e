import { type Credentials, deleteCredentials, readCredentials } from './client/credentials.ts';
import { CliError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import { revokeSignIn } from './client/revoke.ts';
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
  await revokeSignIn(creds, io, 'the sign-in');
  await deleteCredentials(config.credentialsPath);
  io.out(`Logged out of ${creds.issuer}.`);
}
