import { EventEmitter } from 'node:events';
import type { RedisClient } from './redis/client.ts';

// Names shared with every gateway and IdP (docs/reference.md § Redis keys): keys, values and the channel's messages.
export const REVOCATION_CHANNEL = 'platform:revocations';
/** jti values are compared case-insensitively: written and looked up lowercased. */
export const denyJtiKey = (jti: string) => `platform:deny:jti:${jti.toLowerCase()}`;
export const denySubKey = (sub: string) => `platform:deny:sub:${sub}`;
export const denyEmailKey = (email: string) => `platform:deny:email:${email.trim().toLowerCase()}`;
export const jwksKey = (issuer: string) => `platform:jwks:${issuer}`;
/**
 * Set by an IdP once it has written the recorded revocations to Redis; its absence means Redis lost its data
 * (restart, FLUSHALL, failover) and the denylist must be written again. Per issuer, like the rate-limit keys,
 * so two deployments sharing one Redis each restore their own.
 */
export const revocationsRestoredKey = (issuer: string) => `platform:revocations:restored:${issuer}`;
/** A subject cut-off is kept this long past the cut-off: by then every token issued before it has expired. */
export const SUB_CUTOFF_TTL_SECONDS = 3600;

export type RevocationEvent =
  | { jti: string }
  | { sub: string; cutoff: number }
  | { email: string; cutoff: number };

/**
 * A user disconnected a connection (`{"connection","email"}` on the same channel, no cut-off: no platform token is
 * revoked by it): every gateway forgets the upstream token it holds for that user and connection. A message
 * only, no key: a gateway that misses it keeps the token until it expires or the upstream refuses it.
 */
export interface ConnectionDropped {
  connection: string;
  email: string;
}

/** What the IdP needs: put a token, a whole subject or a whole email on the denylist, instantly. */
export interface RevocationPublisher {
  denyJti(jti: string, exp: number): Promise<void>;
  denySubject(sub: string, cutoff: number): Promise<void>;
  denyEmail(email: string, cutoff: number): Promise<void>;
  /** Tells every gateway to drop the user's cached upstream token of `connection`. */
  dropConnection(email: string, connection: string): Promise<void>;
}

export function parseRevocationEvent(text: string): RevocationEvent | undefined {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (typeof v.jti === 'string' && v.jti) return { jti: v.jti.toLowerCase() };
    const cutoff = v.cutoff;
    if (typeof cutoff !== 'number' || !Number.isFinite(cutoff)) return undefined;
    if (typeof v.sub === 'string' && v.sub) return { sub: v.sub, cutoff };
    if (typeof v.email === 'string' && v.email) return { email: v.email.trim().toLowerCase(), cutoff };
  } catch {
    // not JSON: ignored
  }
  return undefined;
}

/** A `{"connection","email"}` message; anything else (a revocation event included) is undefined. */
export function parseConnectionDropped(text: string): ConnectionDropped | undefined {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (v.cutoff !== undefined || v.jti !== undefined) return undefined;
    if (typeof v.connection === 'string' && v.connection && typeof v.email === 'string' && v.email)
      return { connection: v.connection, email: v.email.trim().toLowerCase() };
  } catch {
    // not JSON: ignored
  }
  return undefined;
}

/**
 * Sets a cut-off only when it moves later: a replay of older records, or a replica whose clock is behind,
 * never shortens a revocation another writer made.
 */
const SET_LATER_CUTOFF = `
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) and tonumber(cur) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1`;

const cutoffTtl = (cutoff: number) =>
  Math.max(1, Math.ceil(cutoff + SUB_CUTOFF_TTL_SECONDS - Date.now() / 1000));

export class RedisRevocationPublisher implements RevocationPublisher {
  readonly #redis: RedisClient;
  constructor(redis: RedisClient) {
    this.#redis = redis;
  }

  async denyJti(jti: string, exp: number): Promise<void> {
    const id = jti.toLowerCase();
    const ttl = Math.max(1, Math.ceil(exp - Date.now() / 1000));
    await this.#redis
      .multi()
      .set(denyJtiKey(id), '1', 'EX', ttl)
      .publish(REVOCATION_CHANNEL, JSON.stringify({ jti: id }))
      .exec();
  }

  async denySubject(sub: string, cutoff: number): Promise<void> {
    await this.#redis
      .multi()
      .eval(SET_LATER_CUTOFF, 1, denySubKey(sub), String(cutoff), String(cutoffTtl(cutoff)))
      .publish(REVOCATION_CHANNEL, JSON.stringify({ sub, cutoff }))
      .exec();
  }

  async denyEmail(email: string, cutoff: number): Promise<void> {
    const e = email.trim().toLowerCase();
    await this.#redis
      .multi()
      .eval(SET_LATER_CUTOFF, 1, denyEmailKey(e), String(cutoff), String(cutoffTtl(cutoff)))
      .publish(REVOCATION_CHANNEL, JSON.stringify({ email: e, cutoff }))
      .exec();
  }

  async dropConnection(email: string, connection: string): Promise<void> {
    const e = email.trim().toLowerCase();
    await this.#redis.publish(REVOCATION_CHANNEL, JSON.stringify({ connection, email: e }));
  }
}

/**
 * The in-process stand-in used by `platform dev` (one process, no Redis): the same operations, plus the
 * reads a gateway in the same process makes. Entries expire like their Redis counterparts.
 */
export class MemoryRevocations extends EventEmitter implements RevocationPublisher {
  readonly #jtis = new Map<string, number>();
  readonly #subs = new Map<string, number>();
  readonly #emails = new Map<string, number>();

  async denyJti(jti: string, exp: number): Promise<void> {
    const id = jti.toLowerCase();
    this.#jtis.set(id, exp);
    this.emit('revocation', { jti: id } satisfies RevocationEvent);
  }

  async denySubject(sub: string, cutoff: number): Promise<void> {
    this.#subs.set(sub, Math.max(cutoff, this.#subs.get(sub) ?? 0));
    this.emit('revocation', { sub, cutoff } satisfies RevocationEvent);
  }

  async denyEmail(email: string, cutoff: number): Promise<void> {
    const e = email.trim().toLowerCase();
    this.#emails.set(e, Math.max(cutoff, this.#emails.get(e) ?? 0));
    this.emit('revocation', { email: e, cutoff } satisfies RevocationEvent);
  }

  async dropConnection(email: string, connection: string): Promise<void> {
    const e = email.trim().toLowerCase();
    this.emit('connection-dropped', { connection, email: e } satisfies ConnectionDropped);
  }

  isJtiDenied(jti: string, now = Date.now() / 1000): boolean {
    const id = jti.toLowerCase();
    const exp = this.#jtis.get(id);
    if (exp === undefined) return false;
    if (exp < now) {
      this.#jtis.delete(id);
      return false;
    }
    return true;
  }

  subjectCutoff(sub: string): number | undefined {
    return this.#subs.get(sub);
  }

  emailCutoff(email: string): number | undefined {
    return this.#emails.get(email.trim().toLowerCase());
  }
}
