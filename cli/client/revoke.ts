import * as oidc from 'openid-client';
import type { Credentials } from './credentials.ts';
import { loadDpopKey, proofFetch } from './dpop.ts';
import { CliError } from './errors.ts';
import type { Io } from './io.ts';
import { describeOidcError, discoverIssuer, FROM_STORED_LOGIN } from './oidc.ts';

/**
 * Revokes a stored sign-in at its issuer (RFC 7009): the refresh token, which makes the issuer revoke the whole
 * grant, then the access token while it is still valid (best effort; it also puts the token's jti on the
 * gateway's denylist). Never throws: what could not be revoked is said on stderr, naming `what` was meant.
 * Returns whether the grant was revoked.
 */
export async function revokeSignIn(creds: Credentials, io: Io, what: string): Promise<boolean> {
  try {
    const server = await discoverIssuer(creds.issuer, {
      clientId: creds.client_id,
      warn: io.err,
      from: FROM_STORED_LOGIN,
    });
    // A bound sign-in's revocation carries a proof by its key, as every request with its tokens does.
    if (creds.dpop_key) server[oidc.customFetch] = proofFetch(await loadDpopKey(creds.dpop_key));
    await oidc.tokenRevocation(server, creds.refresh_token, { token_type_hint: 'refresh_token' });
    if (creds.expires_at > Date.now() / 1000) {
      await oidc
        .tokenRevocation(server, creds.access_token, { token_type_hint: 'access_token' })
        .catch((err) => {
          io.err(
            `warning: the access token of ${what} was not revoked (${describeOidcError(err)}); it expires within the hour`,
          );
        });
    }
    return true;
  } catch (err) {
    const reason = err instanceof CliError ? err.message : describeOidcError(err);
    io.err(
      `warning: could not revoke ${what} at ${creds.issuer} (${reason}); it stays valid until it expires`,
    );
    return false;
  }
}
