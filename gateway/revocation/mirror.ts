import {
  type MemoryRevocations,
  type RevocationEvent,
  SUB_CUTOFF_TTL_SECONDS,
} from '../../lib/revocation.ts';
import type { RevocationMode } from '../config.ts';

export type RevocationStatus = 'ok' | 'revoked' | 'unknown';

/** What a revocation can reach in a verified token (VerifiedToken has all of it). */
export interface RevocationSubject {
  /** `jti`, or Entra's `uti`; '' when none. Compared case-insensitively. */
  jti: string;
  sub: string;
  /** Entra's object id ('' otherwise): a subject cut-off keyed by it reaches the user's Entra tokens too. */
  oid: string;
  /** The forwarded email (trimmed, lowercased): an email cut-off reaches every issuer's tokens carrying it. */
  email: string;
  /**
   * A delegated token's actors (machine client ids): a cut-off keyed by one of them (`platform admin
   * revoke-client`) reaches every token in which that client acts for a user.
   */
  actors?: readonly string[];
  iat: number;
}

/** The one question the request path asks, answered from memory (no Redis round trip). */
export interface RevocationCheck {
  check(t: RevocationSubject): RevocationStatus;
  /** False while the copy of Redis is not known to be complete (a resync pending); undefined: no copy at all. */
  readonly current?: boolean;
}

/**
 * A jti revoked through the channel carries no `exp`; it is remembered this long unless Redis tells us the
 * key's real TTL (the denylist entry lives until the token's exp). Longer than any access token we accept.
 */
export const JTI_DEFAULT_RETENTION_SECONDS = 24 * 3600;

/**
 * The in-memory copy of the Redis denylist (`platform:deny:jti:*`, `platform:deny:sub:*`,
 * `platform:deny:email:*`), kept current by
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
  /** lowercased email → cut-off, whatever the token's issuer. */
  readonly #emails = new Map<string, number>();
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
    const id = jti.toLowerCase();
    const prev = this.#jtis.get(id);
    if (prev === undefined || forgetAt !== prev) this.#jtis.set(id, forgetAt);
  }

  denySubject(sub: string, cutoff: number): void {
    const prev = this.#subs.get(sub);
    if (prev === undefined || cutoff > prev) this.#subs.set(sub, cutoff);
  }

  denyEmail(email: string, cutoff: number): void {
    const e = email.trim().toLowerCase();
    const prev = this.#emails.get(e);
    if (prev === undefined || cutoff > prev) this.#emails.set(e, cutoff);
  }

  apply(event: RevocationEvent, now = Date.now() / 1000): void {
    if ('jti' in event) this.denyJti(event.jti, now + JTI_DEFAULT_RETENTION_SECONDS);
    else if ('sub' in event) this.denySubject(event.sub, event.cutoff);
    else this.denyEmail(event.email, event.cutoff);
  }

  check(t: RevocationSubject): RevocationStatus {
    if (t.jti !== '' && this.#jtis.has(t.jti.toLowerCase())) return 'revoked';
    const iat = t.iat;
    let cutoff = this.#subs.get(t.sub);
    if (cutoff !== undefined && iat <= cutoff) return 'revoked';
    // An Entra token's user, cut off by object id (its `sub` is pairwise): see VerifiedToken.oid.
    if (t.oid !== '') {
      cutoff = this.#subs.get(t.oid);
      if (cutoff !== undefined && iat <= cutoff) return 'revoked';
    }
    cutoff = this.#emails.get(t.email);
    if (cutoff !== undefined && iat <= cutoff) return 'revoked';
    const actors = t.actors;
    if (actors !== undefined) {
      for (let i = 0; i < actors.length; i++) {
        cutoff = this.#subs.get(actors[i]!);
        if (cutoff !== undefined && iat <= cutoff) return 'revoked';
      }
    }
    return this.#failClosed && !this.#current ? 'unknown' : 'ok';
  }

  /** Forgets entries no token can still match (run on a timer). */
  sweep(now = Date.now() / 1000): void {
    for (const [jti, forgetAt] of this.#jtis) if (forgetAt < now) this.#jtis.delete(jti);
    for (const cutoffs of [this.#subs, this.#emails]) {
      for (const [k, cutoff] of cutoffs) if (cutoff + SUB_CUTOFF_TTL_SECONDS < now) cutoffs.delete(k);
    }
  }
}

/** `platform dev`: the IdP and the gateway share one process and one MemoryRevocations. */
export function memoryRevocationCheck(store: MemoryRevocations): RevocationCheck {
  const after = (cutoff: number | undefined, iat: number) => cutoff !== undefined && iat <= cutoff;
  return {
    check(t) {
      if (t.jti !== '' && store.isJtiDenied(t.jti)) return 'revoked';
      if (after(store.subjectCutoff(t.sub), t.iat)) return 'revoked';
      if (t.oid !== '' && after(store.subjectCutoff(t.oid), t.iat)) return 'revoked';
      for (const a of t.actors ?? []) if (after(store.subjectCutoff(a), t.iat)) return 'revoked';
      return after(store.emailCutoff(t.email), t.iat) ? 'revoked' : 'ok';
    },
  };
}
