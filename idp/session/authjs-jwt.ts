// The web application's Auth.js JWT-strategy session (docs/idp.md § Web sessions): the session cookie is a JWE
// (`dir`, A256CBC-HS512) under a key derived from the application's AUTH_SECRET by HKDF-SHA-256, salted with the
// cookie's name, and named by its JWK thumbprint in `kid`; a value too large for one cookie is cut into
// `<name>.0`, `<name>.1`, …. Read as Auth.js itself reads it (@auth/core's jwt `decode` and cookie SessionStore):
// several secrets for rotation (newest first), a 15 s clock tolerance on `exp`.
import { hkdfSync } from 'node:crypto';
import { base64url, calculateJwkThumbprint, EncryptJWT, jwtDecrypt } from 'jose';

const ALG = 'dir';
const ENC = 'A256CBC-HS512';
/** The content encryptions Auth.js decodes (it encodes with A256CBC-HS512 only), and their key lengths. */
const KEY_LENGTHS: Readonly<Record<string, number>> = { 'A256CBC-HS512': 64, A256GCM: 32 };
/** Auth.js's own tolerance on `exp` and `nbf` when it decodes a session. */
const CLOCK_TOLERANCE_SECONDS = 15;
/** More chunks than any session a browser can hold (about 180 cookies of 4 KB): beyond, no session. */
const MAX_CHUNKS = 64;

/** What an Auth.js session token says about its user: only `email` and `sub` are read. */
export interface AuthjsSessionClaims {
  /** Lowercased and trimmed. */
  email: string;
  /** The web application's user id (Auth.js sets `sub` to it at sign-in); undefined when absent. */
  sub: string | undefined;
  /** Unix seconds. */
  exp: number;
  /**
   * Unix seconds: when the user signed in, when the application put it in the token (an `auth_time` claim set in
   * its `jwt` callback on sign-in; Auth.js carries custom claims through every re-issue). Undefined otherwise:
   * Auth.js's own claims say nothing about it (`iat` is the latest re-issue).
   */
  authTime: number | undefined;
}

interface DerivedKey {
  key: Uint8Array;
  kid: string;
}

/** HKDF as Auth.js derives its key: SHA-256, the cookie name as salt, "Auth.js Generated Encryption Key (<salt>)". */
function derive(secret: string, salt: string, enc: string): Uint8Array {
  const length = KEY_LENGTHS[enc];
  if (length === undefined) throw new TypeError(`unsupported content encryption ${enc}`);
  return new Uint8Array(
    hkdfSync('sha256', secret, salt, `Auth.js Generated Encryption Key (${salt})`, length),
  );
}

async function derivedKey(secret: string, salt: string, enc: string): Promise<DerivedKey> {
  const key = derive(secret, salt, enc);
  const kid = await calculateJwkThumbprint(
    { kty: 'oct', k: base64url.encode(key) },
    `sha${key.byteLength << 3}` as 'sha256',
  );
  return { key, kid };
}

/** Decrypts the session cookies of one cookie name under a list of secrets (newest first). */
export interface AuthjsSessionReader {
  /**
   * The cookie's value as the browser holds it: the one cookie, or its chunks `<name>.0` … `<name>.N` in order
   * (contiguous from 0). Both at once is no value: Auth.js expires the one form when it sets the other, and
   * joining them, as Auth.js would, gives nothing it wrote; preferring either would let a cookie planted beside
   * the real one (a sibling subdomain can set a `__Secure-` cookie for the parent domain) choose the user.
   */
  value(cookies: ReadonlyMap<string, string>): string | undefined;
  /** The session's claims; undefined when it is not one (undecryptable, expired, without an email). */
  decode(value: string): Promise<AuthjsSessionClaims | undefined>;
}

export function createAuthjsSessionReader(
  secrets: readonly string[],
  cookieName: string,
): AuthjsSessionReader {
  if (secrets.length === 0) throw new TypeError('at least one secret is required');
  // Derived once: every secret's key for each content encryption Auth.js decodes.
  const keys = Promise.all(
    Object.keys(KEY_LENGTHS).flatMap((enc) =>
      secrets.map(async (s) => ({ enc, ...(await derivedKey(s, cookieName, enc)) })),
    ),
  );
  return {
    value(cookies) {
      const first = cookies.get(`${cookieName}.0`);
      if (!first) return cookies.get(cookieName) || undefined;
      if (cookies.get(cookieName)) return undefined;
      const parts = [first];
      for (let i = 1; i < MAX_CHUNKS; i++) {
        const next = cookies.get(`${cookieName}.${i}`);
        if (!next) return parts.join('');
        parts.push(next);
      }
      return undefined;
    },
    async decode(value) {
      // A compact JWE has five parts; anything else (a database session's token) is not this kind of session.
      if (value.split('.').length !== 5) return undefined;
      const all = await keys;
      try {
        const { payload } = await jwtDecrypt(
          value,
          (header) => {
            const candidates = all.filter((k) => k.enc === header.enc);
            // Auth.js: without a kid, the newest secret; with one, the secret whose key it names.
            const found =
              header.kid === undefined ? candidates[0] : candidates.find((k) => k.kid === header.kid);
            if (!found) throw new Error('no secret matches the session');
            return found.key;
          },
          {
            clockTolerance: CLOCK_TOLERANCE_SECONDS,
            keyManagementAlgorithms: [ALG],
            contentEncryptionAlgorithms: Object.keys(KEY_LENGTHS),
            requiredClaims: ['exp'],
          },
        );
        if (typeof payload.email !== 'string' || payload.email.trim() === '') return undefined;
        const authTime = payload.auth_time;
        const now = Math.floor(Date.now() / 1000);
        return {
          email: payload.email.trim().toLowerCase(),
          sub: typeof payload.sub === 'string' ? payload.sub : undefined,
          exp: payload.exp!,
          // A sign-in time in the future (beyond the clock tolerance) is no sign-in time.
          authTime:
            typeof authTime === 'number' &&
            Number.isInteger(authTime) &&
            authTime > 0 &&
            authTime <= now + CLOCK_TOLERANCE_SECONDS
              ? authTime
              : undefined,
        };
      } catch {
        // Undecryptable (another secret, tampered, malformed) or expired: as no session.
        return undefined;
      }
    },
  };
}

/**
 * A session token as Auth.js's `encode` makes it (the newest secret; `iat`, `exp` = now + maxAge, a random
 * `jti`): for `platform dev --session jwt`, which plays the web application.
 */
export async function encodeAuthjsSession(o: {
  secret: string;
  cookieName: string;
  claims: Record<string, unknown>;
  maxAgeSeconds: number;
}): Promise<string> {
  const { key, kid } = await derivedKey(o.secret, o.cookieName, ENC);
  return new EncryptJWT(o.claims)
    .setProtectedHeader({ alg: ALG, enc: ENC, kid })
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + o.maxAgeSeconds)
    .setJti(crypto.randomUUID())
    .encrypt(key);
}

/**
 * A session token's cookies as Auth.js sets them: one cookie, or chunks of at most CHUNK_SIZE characters
 * named `<name>.0` … when it is larger.
 */
export function authjsSessionCookies(cookieName: string, value: string): { name: string; value: string }[] {
  const CHUNK_SIZE = 4096 - 160;
  if (value.length <= CHUNK_SIZE) return [{ name: cookieName, value }];
  const out: { name: string; value: string }[] = [];
  for (let i = 0; i * CHUNK_SIZE < value.length; i++)
    out.push({ name: `${cookieName}.${i}`, value: value.slice(i * CHUNK_SIZE, (i + 1) * CHUNK_SIZE) });
  return out;
}
