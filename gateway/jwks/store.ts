import { createHmac, timingSafeEqual } from 'node:crypto';
import type { RedisClient } from '../../lib/redis/client.ts';
import { jwksKey } from '../../lib/revocation.ts';

/**
 * docs/reference.md § Redis keys: `platform:jwks:<issuer>` holds the tagged JWKS JSON for an hour at most, less
 * when the issuer's key-set response says so (Cache-Control max-age; the platform IdP keeps it below its
 * key-rotation margin).
 */
export const JWKS_TTL_SECONDS = 3600;
/** The shortest a fetched key set is kept: a max-age of 0 must not turn every request into a fetch. */
export const MIN_JWKS_TTL_SECONDS = 1;

/** How long a key set fetched with `maxAgeSeconds` is used: its max-age within 1 s … 1 h (none: 1 h). */
export function jwksTtlSeconds(maxAgeSeconds: number | undefined): number {
  if (maxAgeSeconds === undefined) return JWKS_TTL_SECONDS;
  return Math.max(MIN_JWKS_TTL_SECONDS, Math.min(JWKS_TTL_SECONDS, maxAgeSeconds));
}

/** The label the key-set cache key is derived under (its own, apart from the identity keys'). */
const KEY_LABEL = 'platform-jwks-cache-v1';

/** Where gateway replicas share fetched key sets. Failures read as "nothing there": Redis is an optimisation. */
export interface JwksStore {
  read(issuer: string): Promise<{ json: string; ttlMs: number } | undefined>;
  write(issuer: string, json: string, ttlSeconds?: number): Promise<void>;
}

/**
 * The value format (docs/gateway.md § Caches): `{"v":1,"exp":<unix s>,"tag":"<hex>","jwks":"<JWKS JSON text>"}`,
 * `tag` = hex HMAC-SHA256 under `HMAC-SHA256(GATEWAY_IDENTITY_SECRET, "platform-jwks-cache-v1")` of the lines
 * `v1`, issuer, exp, JWKS text joined with `\n`. Redis cannot be trusted with keys: anyone who can write it could
 * otherwise plant their own key and forge any user. The issuer is in the tag, so a set cannot be moved to another
 * issuer's key; `exp` is in it, so an old set (with a since-withdrawn key) cannot be replayed beyond its hour.
 */
export class JwksCacheCodec {
  readonly #key: Buffer;

  constructor(identitySecret: string) {
    this.#key = createHmac('sha256', identitySecret).update(KEY_LABEL).digest();
  }

  #tag(issuer: string, exp: number, jwks: string): Buffer {
    return createHmac('sha256', this.#key).update(`v1\n${issuer}\n${exp}\n${jwks}`).digest();
  }

  encode(issuer: string, jwks: string, exp: number): string {
    return JSON.stringify({ v: 1, exp, tag: this.#tag(issuer, exp, jwks).toString('hex'), jwks });
  }

  /** The JWKS text of a value made by encode() for this issuer, or why it is refused. `now` in unix seconds. */
  decode(issuer: string, value: string, now: number): { jwks: string; exp: number } | { problem: string } {
    let doc: unknown;
    try {
      doc = JSON.parse(value);
    } catch {
      return { problem: 'not JSON' };
    }
    const { v, exp, tag, jwks } = (doc ?? {}) as Record<string, unknown>;
    if (v !== 1 || typeof tag !== 'string' || typeof jwks !== 'string' || !Number.isSafeInteger(exp)) {
      return { problem: 'not a tagged key set (untagged values of earlier versions are refetched)' };
    }
    const given = Buffer.from(tag, 'hex');
    const expected = this.#tag(issuer, exp as number, jwks);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { problem: 'authentication tag does not match' };
    }
    if ((exp as number) <= now) return { problem: 'expired' };
    return { jwks, exp: exp as number };
  }
}

export class RedisJwksStore implements JwksStore {
  readonly #redis: RedisClient;
  readonly #codec: JwksCacheCodec;
  readonly #onRejected: (issuer: string, detail: string) => void;

  constructor(
    redis: RedisClient,
    codec: JwksCacheCodec,
    onRejected: (issuer: string, detail: string) => void,
  ) {
    this.#redis = redis;
    this.#codec = codec;
    this.#onRejected = onRejected;
  }

  async read(issuer: string, nowMs = Date.now()): Promise<{ json: string; ttlMs: number } | undefined> {
    let value: unknown;
    let ttl: unknown;
    try {
      const res = await this.#redis.multi().get(jwksKey(issuer)).pttl(jwksKey(issuer)).exec();
      value = res?.[0]?.[1];
      ttl = res?.[1]?.[1];
    } catch {
      return undefined;
    }
    if (typeof value !== 'string' || typeof ttl !== 'number' || ttl <= 0) return undefined;
    const decoded = this.#codec.decode(issuer, value, Math.floor(nowMs / 1000));
    if ('problem' in decoded) {
      this.#onRejected(issuer, decoded.problem);
      return undefined;
    }
    return { json: decoded.jwks, ttlMs: Math.min(ttl, decoded.exp * 1000 - nowMs) };
  }

  async write(issuer: string, json: string, ttlSeconds = JWKS_TTL_SECONDS): Promise<void> {
    const exp = Math.floor(Date.now() / 1000) + ttlSeconds;
    try {
      await this.#redis.set(jwksKey(issuer), this.#codec.encode(issuer, json, exp), 'EX', ttlSeconds);
    } catch {
      // Redis down: the next replica to miss fetches over HTTP itself.
    }
  }
}
