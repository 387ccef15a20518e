import {
  type MemoryRevocations,
  type RevocationEvent,
  SUB_CUTOFF_TTL_SECONDS,
} from '../../lib/revocation.ts';
import type { RevocationMode } from '../config.ts';

export type RevocationStatus = 'ok' | 'revoked' | 'unknown';

/** The one question the request path asks, answered from memory (no Redis round trip). */
export interface RevocationCheck {
  check(jti: string, sub: string, iat: number): RevocationStatus;
}

/**
 * A jti revoked through the channel carries no `exp`; it is remembered this long unless Redis tells us the
 * key's real TTL (the denylist entry lives until the token's exp). Longer than any access token we accept.
 */
export const JTI_DEFAULT_RETENTION_SECONDS = 24 * 3600;

/**
 * The in-memory copy of the Redis denylist (`platform:deny:jti:*`, `platform:deny:sub:*`), kept current by
 * the `platform:revocations` channel and a full resync on every (re)connection (revocation/redis-sync.ts).
 * While it is not known to be current (Redis unreachable), `fail-closed` answers 'unknown' for every token
 * the mirror does not already reject; `fail-open` keeps answering from what it has.
 */
export class RevocationMirror implements RevocationCheck {
  readonly #failClosed: boolean;
  /** jti → unix seconds after which it may be forgotten. */
  readonly #jtis = new Map<string, number>();
  /** sub → cut-off (tokens with iat ≤ it are revoked). */
  readonly #subs = new Map<string, number>();
  #current = false;

  constructor(mode: RevocationMode) {
    this.#failClosed = mode === 'fail-closed';
  }

  get current(): boolean {
    return this.#current;
  }

  setCurrent(current: boolean): void {
    this.#current = current;
  }

  denyJti(jti: string, forgetAt: number): void {
    const prev = this.#jtis.get(jti);
    if (prev === undefined || forgetAt !== prev) this.#jtis.set(jti, forgetAt);
  }

  denySubject(sub: string, cutoff: number): void {
    const prev = this.#subs.get(sub);
    if (prev === undefined || cutoff > prev) this.#subs.set(sub, cutoff);
  }

  apply(event: RevocationEvent, now = Date.now() / 1000): void {
    if ('jti' in event) this.denyJti(event.jti, now + JTI_DEFAULT_RETENTION_SECONDS);
    else if ('sub' in event) this.denySubject(event.sub, event.cutoff);
  }

  check(jti: string, sub: string, iat: number): RevocationStatus {
    if (jti !== '' && this.#jtis.has(jti)) return 'revoked';
    const cutoff = this.#subs.get(sub);
    if (cutoff !== undefined && iat <= cutoff) return 'revoked';
    return this.#failClosed && !this.#current ? 'unknown' : 'ok';
  }

  /** Forgets entries no token can still match (run on a timer). */
  sweep(now = Date.now() / 1000): void {
    for (const [jti, forgetAt] of this.#jtis) if (forgetAt < now) this.#jtis.delete(jti);
    for (const [sub, cutoff] of this.#subs) if (cutoff + SUB_CUTOFF_TTL_SECONDS < now) this.#subs.delete(sub);
  }
}

/** `platform dev`: the IdP and the gateway share one process and one MemoryRevocations. */
export function memoryRevocationCheck(store: MemoryRevocations): RevocationCheck {
  return {
    check(jti, sub, iat) {
      if (jti !== '' && store.isJtiDenied(jti)) return 'revoked';
      const cutoff = store.subjectCutoff(sub);
      return cutoff !== undefined && iat <= cutoff ? 'revoked' : 'ok';
    },
  };
}
