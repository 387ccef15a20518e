import type { Redis } from 'ioredis';
import { jwksKey } from '../../lib/revocation.ts';

/** The shared Redis keys (README): `platform:jwks:<issuer>` holds the JWKS JSON for an hour. */
export const JWKS_TTL_SECONDS = 3600;

/** Where gateway replicas share fetched key sets. Failures read as "nothing there": Redis is an optimisation. */
export interface JwksStore {
  read(issuer: string): Promise<{ json: string; ttlMs: number } | undefined>;
  write(issuer: string, json: string): Promise<void>;
}

export class RedisJwksStore implements JwksStore {
  readonly #redis: Redis;
  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async read(issuer: string): Promise<{ json: string; ttlMs: number } | undefined> {
    try {
      const res = await this.#redis.multi().get(jwksKey(issuer)).pttl(jwksKey(issuer)).exec();
      const json = res?.[0]?.[1];
      const ttl = res?.[1]?.[1];
      if (typeof json !== 'string' || typeof ttl !== 'number' || ttl <= 0) return undefined;
      return { json, ttlMs: ttl };
    } catch {
      return undefined;
    }
  }

  async write(issuer: string, json: string): Promise<void> {
    try {
      await this.#redis.set(jwksKey(issuer), json, 'EX', JWKS_TTL_SECONDS);
    } catch {
      // Redis down: the next replica to miss fetches over HTTP itself.
    }
  }
}
