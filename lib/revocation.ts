import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';

// Names shared with every gateway and IdP (docs/reference.md § Redis keys).
export const REVOCATION_CHANNEL = 'platform:revocations';
export const denyJtiKey = (jti: string) => `platform:deny:jti:${jti}`;
export const denySubKey = (sub: string) => `platform:deny:sub:${sub}`;
export const jwksKey = (issuer: string) => `platform:jwks:${issuer}`;
/** A subject cut-off is kept this long past the cut-off: by then every token issued before it has expired. */
export const SUB_CUTOFF_TTL_SECONDS = 3600;

export type RevocationEvent = { jti: string } | { sub: string; cutoff: number };

/** What the IdP and the admin command need: put a token or a whole subject on the denylist, instantly. */
export interface RevocationPublisher {
  denyJti(jti: string, exp: number): Promise<void>;
  denySubject(sub: string, cutoff: number): Promise<void>;
}

export function parseRevocationEvent(text: string): RevocationEvent | undefined {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (typeof v.jti === 'string' && v.jti) return { jti: v.jti };
    if (typeof v.sub === 'string' && v.sub && typeof v.cutoff === 'number' && Number.isFinite(v.cutoff)) {
      return { sub: v.sub, cutoff: v.cutoff };
    }
  } catch {
    // not JSON: ignored
  }
  return undefined;
}

export class RedisRevocationPublisher implements RevocationPublisher {
  readonly #redis: Redis;
  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async denyJti(jti: string, exp: number): Promise<void> {
    const ttl = Math.max(1, Math.ceil(exp - Date.now() / 1000));
    await this.#redis
      .multi()
      .set(denyJtiKey(jti), '1', 'EX', ttl)
      .publish(REVOCATION_CHANNEL, JSON.stringify({ jti }))
      .exec();
  }

  async denySubject(sub: string, cutoff: number): Promise<void> {
    const ttl = Math.max(1, Math.ceil(cutoff + SUB_CUTOFF_TTL_SECONDS - Date.now() / 1000));
    await this.#redis
      .multi()
      .set(denySubKey(sub), String(cutoff), 'EX', ttl)
      .publish(REVOCATION_CHANNEL, JSON.stringify({ sub, cutoff }))
      .exec();
  }
}

/**
 * The in-process stand-in used by `platform dev` (one process, no Redis): the same two operations, plus the
 * reads a gateway in the same process makes. Entries expire like their Redis counterparts.
 */
export class MemoryRevocations extends EventEmitter implements RevocationPublisher {
  readonly #jtis = new Map<string, number>();
  readonly #subs = new Map<string, number>();

  async denyJti(jti: string, exp: number): Promise<void> {
    this.#jtis.set(jti, exp);
    this.emit('revocation', { jti } satisfies RevocationEvent);
  }

  async denySubject(sub: string, cutoff: number): Promise<void> {
    this.#subs.set(sub, Math.max(cutoff, this.#subs.get(sub) ?? 0));
    this.emit('revocation', { sub, cutoff } satisfies RevocationEvent);
  }

  isJtiDenied(jti: string, now = Date.now() / 1000): boolean {
    const exp = this.#jtis.get(jti);
    if (exp === undefined) return false;
    if (exp < now) {
      this.#jtis.delete(jti);
      return false;
    }
    return true;
  }

  subjectCutoff(sub: string): number | undefined {
    return this.#subs.get(sub);
  }
}
