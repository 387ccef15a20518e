import type { Logger } from '../../lib/logger.ts';
import type { IdpContext } from '../context.ts';
import { DEVICE_CODE_GRANT, hashDeviceSecret } from '../device-codes.ts';
import { scopeAtIssuance } from '../entitlements/entitlements.ts';
import { InvalidGrantError, InvalidRequestError, OAuthError } from '../errors.ts';
import { adminPowers, withinPowers } from '../scopes.ts';
import type { Grant } from '../store/refresh-tokens.ts';
import { inTransaction } from '../store/transaction.ts';
import { newJti } from '../tokens/jwt.ts';
import { newRefreshToken, tokenResponse } from './token-response.ts';

/**
 * The device_code grant (RFC 8628 §3.4–3.5): each poll answers authorization_pending, slow_down (polling
 * faster than the interval; the interval then grows by 5 s), access_denied, expired_token, or the tokens —
 * once. A device code presented again after it produced tokens is invalid_grant, and the refresh tokens it
 * produced are revoked (as for a replayed authorization code: someone else holds the code).
 */
export async function deviceCodeGrant(
  ctx: IdpContext,
  form: Map<string, string>,
  clientId: string,
  log: Logger,
  dpopJkt: string | undefined,
): Promise<Record<string, unknown>> {
  const code = form.get('device_code');
  if (!code) throw new InvalidRequestError('device_code is missing');
  if (code.length > 256) throw new InvalidGrantError('device code is invalid');
  const hash = hashDeviceSecret(code);
  // One transaction, as for an authorization code: the approving user's lock, the poll (which consumes an
  // approved code), the entitlements read (grant rows locked) and the family created (docs/idp.md § Revocation).
  const out = await inTransaction(ctx.pool, async (tx) => {
    await ctx.deviceCodes.lockUser(tx, hash);
    const outcome = await ctx.deviceCodes.poll(tx, hash, clientId);
    if (outcome.kind !== 'approved') return { outcome };
    const a = outcome.approval;
    const scope = await scopeAtIssuance(ctx.entitlements, a.grantedScope, a, tx);
    const ent = await ctx.entityGrants.claims(a, tx);
    const grant: Grant = {
      familyId: outcome.familyId,
      userId: a.userId,
      subject: a.subject,
      email: a.email,
      clientId,
      // Never an administrative scope through the device flow, whatever the stored approval says; the refresh
      // token keeps this scope, so no refresh can add one either.
      scope: withinPowers(scope, adminPowers(ctx.config, { ...a, clientId, grant: 'device_code' })),
      authTime: a.authTime,
      emailVerified: a.emailVerified,
      // A proof with the exchange binds the sign-in (its refresh tokens) to the proof's key.
      dpopJkt,
    };
    const jti = newJti();
    const refresh = newRefreshToken();
    await ctx.refreshTokens.issue(tx, grant, refresh.token, {
      jti,
      grantType: DEVICE_CODE_GRANT,
      iat: outcome.iat,
    });
    return { outcome, issued: { grant, jti, iat: outcome.iat, refresh, ent } };
  });
  const { outcome } = out;
  switch (outcome.kind) {
    case 'unknown':
      throw new InvalidGrantError('device code is invalid');
    case 'wrong_client':
      throw new InvalidGrantError('device code was issued to another client');
    case 'revoked':
      throw new InvalidGrantError('device code was revoked');
    case 'blocked':
      throw new OAuthError('access_denied', 'the user is blocked');
    case 'consumed': {
      const revoked = await ctx.revocation.revokeFamily({
        familyId: outcome.familyId,
        by: 'device code reused',
        reason: 'device code reused',
        quiet: true,
      });
      log.warn({ clientId, revoked }, 'device code reused: its grant is revoked');
      throw new InvalidGrantError('device code was already used');
    }
    case 'expired':
      throw new OAuthError('expired_token', 'the device code has expired; start again');
    case 'slow_down':
      throw new OAuthError('slow_down', `polling too fast; wait ${outcome.interval} s between requests`);
    case 'pending':
      throw new OAuthError('authorization_pending', 'the user has not approved the request yet');
    case 'denied':
      throw new OAuthError('access_denied', 'the user denied the request');
  }
  const { grant, jti, iat, refresh, ent } = out.issued!;
  log.info({ clientId, sub: grant.subject }, 'device code exchanged');
  return tokenResponse(ctx, {
    grant,
    scope: grant.scope,
    jti,
    iat,
    refreshToken: refresh.value,
    nonce: undefined,
    dpopJkt,
    ent,
  });
}
