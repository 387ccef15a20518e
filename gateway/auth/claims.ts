import { InvalidTokenError } from './errors.ts';
import type { JsonObject } from './jws.ts';

/** resource-server-contract.md § Bearer validation: 60 s leeway on exp, nbf and iat. */
export const LEEWAY_SECONDS = 60;

// Claim values the gateway copies into the signed identity headers: printable ASCII only, so nothing can
// break the header syntax or shift the newline-separated fields of the HMAC input (lib/identity.ts).
const HEADER_SAFE = /^[\x20-\x7E]*$/;

export interface RegisteredClaims {
  iss: string;
  sub: string;
  aud: readonly string[];
  exp: number;
  iat: number;
}

function numericDate(payload: JsonObject, name: string, required: true): number;
function numericDate(payload: JsonObject, name: string, required: false): number | undefined;
function numericDate(payload: JsonObject, name: string, required: boolean): number | undefined {
  const v = payload[name];
  if (v === undefined) {
    if (required) throw new InvalidTokenError('missing_claim', `token has no ${name} claim`);
    return undefined;
  }
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new InvalidTokenError('invalid_claim', `token ${name} claim is not a NumericDate`);
  }
  return v;
}

/** Required `exp iat iss aud sub` and the time window (leeway 60 s), checked after the signature. */
export function checkRegisteredClaims(payload: JsonObject, now: number): RegisteredClaims {
  const exp = numericDate(payload, 'exp', true);
  const iat = numericDate(payload, 'iat', true);
  const nbf = numericDate(payload, 'nbf', false);
  const { iss, sub, aud } = payload;
  if (typeof iss !== 'string') throw new InvalidTokenError('missing_claim', 'token has no iss claim');
  if (typeof sub !== 'string' || sub === '')
    throw new InvalidTokenError('missing_claim', 'token has no sub claim');
  if (!HEADER_SAFE.test(sub))
    throw new InvalidTokenError('invalid_claim', 'token sub claim has characters outside printable ASCII');
  let audience: string[];
  if (typeof aud === 'string') audience = [aud];
  else if (Array.isArray(aud) && aud.length > 0 && aud.every((a) => typeof a === 'string'))
    audience = aud as string[];
  else if (aud === undefined) throw new InvalidTokenError('missing_claim', 'token has no aud claim');
  else throw new InvalidTokenError('invalid_claim', 'token aud claim is not a string or an array of strings');
  if (exp <= now - LEEWAY_SECONDS) throw new InvalidTokenError('token_expired', 'token has expired');
  if (nbf !== undefined && nbf > now + LEEWAY_SECONDS)
    throw new InvalidTokenError('token_not_yet_valid', 'token is not valid yet (nbf)');
  if (iat > now + LEEWAY_SECONDS)
    throw new InvalidTokenError('token_issued_in_future', 'token was issued in the future (iat)');
  return { iss, sub, aud: audience, exp, iat };
}

/** First present of `email`, `preferred_username`, `upn`; trimmed and lowercased (the spec's rule). */
export function emailOf(payload: JsonObject): string {
  for (const name of ['email', 'preferred_username', 'upn'] as const) {
    const v = payload[name];
    if (typeof v === 'string' && v.trim() !== '') {
      const email = v.trim().toLowerCase();
      if (!HEADER_SAFE.test(email)) {
        throw new InvalidTokenError(
          'invalid_claim',
          `token ${name} claim has characters outside printable ASCII`,
        );
      }
      return email;
    }
  }
  throw new InvalidTokenError('missing_email', 'token has no email, preferred_username or upn claim');
}

/** An optional string claim copied into an identity header ('' when absent). */
export function headerClaim(payload: JsonObject, ...names: string[]): string {
  for (const name of names) {
    const v = payload[name];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !HEADER_SAFE.test(v)) {
      throw new InvalidTokenError('invalid_claim', `token ${name} claim is not a printable ASCII string`);
    }
    return v;
  }
  return '';
}
