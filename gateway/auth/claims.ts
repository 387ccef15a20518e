import { InvalidTokenError } from '../errors.ts';
import type { JsonObject } from './jws.ts';

/** resource-server-contract.md § Bearer validation: 60 s leeway on exp, nbf and iat. */
export const LEEWAY_SECONDS = 60;

// Claim values the gateway copies into the signed identity headers. A control character could break the header
// or shift the newline-separated lines of the signed message (lib/identity.ts); white space at an end would be
// lost or kept differently by each HTTP stack on the way, and makes `admin@x` and `admin@x ` two identities.
// Outside printable ASCII a value cannot travel in a header byte for byte. All three: INVALID_TOKEN
// `malformed_claim` (docs/gateway.md § Claims forwarded).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the rule is exactly about control characters
const CONTROL = /[\x00-\x1F\x7F-\x9F]/;
const PRINTABLE_ASCII = /^[\x20-\x7E]*$/;

/** Throws INVALID_TOKEN `malformed_claim` unless `v` can be forwarded in an identity header as it is. */
function checkForwardable(name: string, v: string): void {
  let problem: string | undefined;
  if (CONTROL.test(v)) problem = 'contains a control character';
  else if (v !== v.trim()) problem = 'has leading or trailing white space';
  else if (!PRINTABLE_ASCII.test(v)) problem = 'has characters outside printable ASCII';
  if (problem) throw new InvalidTokenError('malformed_claim', `token ${name} claim ${problem}`);
}

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
  checkForwardable('sub', sub);
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

/** A non-empty string claim, trimmed; undefined when absent, empty or not a string. */
function trimmedString(payload: JsonObject, name: string): string | undefined {
  const v = payload[name];
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/** The email as forwarded: trimmed and lowercased (the spec's rule), with no control characters. */
function forwardedEmail(name: string, v: string): string {
  const email = v.toLowerCase();
  checkForwardable(name, email);
  return email;
}

/** Platform and service tokens: first present of `email`, `preferred_username`, `upn`. */
export function emailOf(payload: JsonObject): string {
  for (const name of ['email', 'preferred_username', 'upn'] as const) {
    const v = trimmedString(payload, name);
    if (v !== undefined) return forwardedEmail(name, v);
  }
  throw new InvalidTokenError('missing_email', 'token has no email, preferred_username or upn claim');
}

/**
 * Entra tokens: the `email` claim is whatever the user's directory entry says, and in many tenants (guests,
 * unverified domains) anyone can set it — to an admin's address, say. It counts only when confirmed: equal,
 * case-insensitively, to `preferred_username` or `upn` (which Entra controls), or with the optional claim
 * `xms_edov` (email domain owner verified) true. Otherwise the forwarded email is the first present of
 * `preferred_username`, `upn`. Tool servers grant admin rights by this email (docs/security.md).
 */
export function entraEmailOf(payload: JsonObject): string {
  const email = trimmedString(payload, 'email');
  const preferred = trimmedString(payload, 'preferred_username');
  const upn = trimmedString(payload, 'upn');
  if (email !== undefined) {
    const lower = email.toLowerCase();
    const edov = payload.xms_edov;
    if (
      lower === preferred?.toLowerCase() ||
      lower === upn?.toLowerCase() ||
      edov === true ||
      edov === 'true'
    ) {
      return forwardedEmail('email', email);
    }
  }
  if (preferred !== undefined) return forwardedEmail('preferred_username', preferred);
  if (upn !== undefined) return forwardedEmail('upn', upn);
  throw new InvalidTokenError(
    'missing_email',
    email === undefined
      ? 'token has no email, preferred_username or upn claim'
      : 'token email claim is not confirmed (no matching preferred_username or upn, no xms_edov) and there is no preferred_username or upn',
  );
}

/** An optional string claim copied into an identity header ('' when absent). */
export function headerClaim(payload: JsonObject, ...names: string[]): string {
  for (const name of names) {
    const v = payload[name];
    if (v === undefined) continue;
    if (typeof v !== 'string')
      throw new InvalidTokenError('invalid_claim', `token ${name} claim is not a string`);
    checkForwardable(name, v);
    return v;
  }
  return '';
}

// An RFC 7638 SHA-256 thumbprint, base64url: 43 characters.
const JKT = /^[A-Za-z0-9_-]{43}$/;

/** `cnf.jkt` of any trust path's token ('' when there is no `cnf`); a `cnf` that is not usable is refused. */
export function confirmationJkt(payload: JsonObject): string {
  const cnf = payload.cnf;
  if (cnf === undefined) return '';
  const jkt = cnf !== null && typeof cnf === 'object' ? (cnf as JsonObject).jkt : undefined;
  // A confirmation the gateway cannot check (x5t#S256, jwk, …) must not be read as "unbound".
  if (typeof jkt !== 'string' || !JKT.test(jkt)) {
    throw new InvalidTokenError('invalid_claim', 'token cnf claim has no usable jkt (RFC 9449 §6.1)');
  }
  return jkt;
}

/** A delegation chain deeper than this is refused: no legitimate chain of services is that long. */
const MAX_ACT_DEPTH = 8;

/**
 * The actors of a delegated token (RFC 8693 §4.1 `act`), the current one first: `act.sub`, then the `act.sub`
 * nested inside it (a prior actor), and so on. Empty when the token has no `act`. Each `sub` is forwarded (the
 * first in `x-platform-actor`) and checked against revocations, so it must be a forwardable string.
 */
export function actorsOf(payload: JsonObject): string[] {
  const actors: string[] = [];
  let act = payload.act;
  while (act !== undefined) {
    if (act === null || typeof act !== 'object' || Array.isArray(act)) {
      throw new InvalidTokenError('invalid_claim', 'token act claim is not an object (RFC 8693 §4.1)');
    }
    const sub = (act as JsonObject).sub;
    if (typeof sub !== 'string' || sub === '') {
      throw new InvalidTokenError('invalid_claim', 'token act claim has no sub (RFC 8693 §4.1)');
    }
    checkForwardable('act.sub', sub);
    actors.push(sub);
    if (actors.length > MAX_ACT_DEPTH) {
      throw new InvalidTokenError('invalid_claim', `token act claim is nested deeper than ${MAX_ACT_DEPTH}`);
    }
    act = (act as JsonObject).act;
  }
  return actors;
}
