import type { IncomingMessage } from 'node:http';
import { errors as joseErrors, jwtVerify } from 'jose';
import { ASSERTION_ALGS } from '../client-auth/index.ts';
import type { IdpContext } from '../context.ts';
import { InvalidGrantError, OAuthError } from '../errors.ts';
import { countedFetches } from '../outbound/index.ts';
import { trustedAssertion } from '../trusted-issuers/index.ts';

// Workload assertions (RFC 7523 §2.1, grant_type jwt-bearer): a CI provider's or Kubernetes' OIDC token, from a
// `workload` issuer of PLATFORM_TRUSTED_ISSUERS_FILE, stands for the machine client registered with that issuer
// and subject (`platform admin clients add --workload-issuer ISS --workload-subject SUB`).

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** A workload token may live at most this long (its jti is kept until it expires). */
const MAX_ASSERTION_SECONDS = 24 * 3600;
const CLOCK_TOLERANCE_SECONDS = 30;

/** The machine client a workload assertion stands for (revoked or not: the issuance decides), and its issuer. */
export async function workloadClient(
  ctx: IdpContext,
  form: ReadonlyMap<string, string>,
  req: IncomingMessage,
): Promise<{ clientId: string; issuer: string }> {
  const { assertion, trusted } = trustedAssertion(ctx.trustedIssuers, form, 'workload');
  // A key-set fetch this needs is counted for the request's address and the key set's host (idp/outbound).
  const gate = countedFetches(ctx.rateLimiter, req);
  const issuer = ctx.config.issuer;
  let payload: { sub?: string; jti?: unknown; exp?: number };
  try {
    ({ payload } = await jwtVerify(assertion, ctx.trustedIssuers!.keys(trusted, gate), {
      issuer: trusted.issuer,
      audience: [issuer, `${issuer}/oauth/token`],
      algorithms: ASSERTION_ALGS,
      requiredClaims: ['exp', 'jti', 'sub'],
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    }));
  } catch (err) {
    if (err instanceof OAuthError) throw err;
    const why = err instanceof joseErrors.JOSEError ? err.message : 'the assertion could not be verified';
    throw new InvalidGrantError(`assertion is invalid: ${why}`);
  }
  const now = Math.floor(Date.now() / 1000);
  if (typeof payload.jti !== 'string' || payload.jti === '' || payload.jti.length > 256)
    throw new InvalidGrantError('assertion jti must be a non-empty string');
  if (payload.exp! - now > MAX_ASSERTION_SECONDS)
    throw new InvalidGrantError(`assertion must expire within ${MAX_ASSERTION_SECONDS} s`);
  const { rows } = await ctx.pool.query<{ client_id: string }>(
    `SELECT client_id FROM platform.machine_clients WHERE workload_issuer = $1 AND workload_subject = $2
      ORDER BY revoked_at IS NULL DESC, created_at DESC LIMIT 1`,
    [trusted.issuer, payload.sub],
  );
  const clientId = rows[0]?.client_id;
  if (!clientId) throw new InvalidGrantError('no machine client is registered for this workload subject');
  // Single use on every replica, per issuer (the client assertions' table, keyed `workload:<issuer>`).
  const used = await ctx.pool.query(
    `INSERT INTO platform.client_assertion_jtis (client_id, jti, expires_at)
     VALUES ($1, $2, to_timestamp($3)) ON CONFLICT DO NOTHING`,
    [`workload:${trusted.issuer}`, payload.jti, payload.exp! + CLOCK_TOLERANCE_SECONDS],
  );
  if (used.rowCount !== 1) throw new InvalidGrantError('assertion was already used (jti)');
  return { clientId, issuer: trusted.issuer };
}
