import { identityValueSha256 } from '../../lib/identity.ts';
import type { ConnectionDropped, RevocationEvent } from '../../lib/revocation.ts';

// The users' upstream tokens, as exchanged, held in this process's memory only (never in Redis, never logged):
// per user, connection and actor chain, until 60 s before they expire. A revocation of the user (subject or
// email cut-off) or of an actor drops every entry obtained at or before its cut-off; the user disconnecting the
// connection drops the user's entries of it; an upstream's 401 drops the token it refused.

/** An exchanged token is reused until this long before its expiry (a request must not carry a dying token). */
export const EXPIRY_MARGIN_SECONDS = 60;
/** Bound on the entries held; beyond it the oldest go first. */
const MAX_ENTRIES = 100_000;

export interface CachedUpstreamToken {
  /** A secret: never logged. */
  readonly token: string;
  /** Its hex SHA-256 as identity v4 signs it (lib/identity.ts), hashed once here rather than per request. */
  readonly sha256: string;
  /** ms epoch after which the entry is not served. */
  readonly usableUntil: number;
  /** Unix seconds when the exchange started: a cut-off at or after it makes the entry stale. */
  readonly obtainedAt: number;
  readonly sub: string;
  readonly email: string;
  readonly actors: readonly string[];
}

/** Whose token: one user, one connection, one chain of actors (a delegated token is not the user's own client). */
export interface TokenOwner {
  connection: string;
  sub: string;
  email: string;
  actors: readonly string[];
}

export function cacheKey(o: TokenOwner): string {
  // `sub` and actor ids are forwardable claims (no control characters): the newline cannot be forged into them.
  return o.actors.length === 0
    ? `${o.connection}\n${o.sub}`
    : `${o.connection}\n${o.sub}\n${o.actors.join('\n')}`;
}

/** How long a disconnect is remembered against exchanges already in flight (they time out after 10 s). */
const DISCONNECT_MEMORY_SECONDS = 60;

export class UpstreamTokenCache {
  readonly #entries = new Map<string, CachedUpstreamToken>();
  /** `connection\nemail` → unix seconds of the user's latest disconnect of it (recent ones only). */
  readonly #disconnects = new Map<string, number>();

  get size(): number {
    return this.#entries.size;
  }

  /** The entry for `key` when still usable at `nowMs`; an expired one is forgotten. */
  get(key: string, nowMs: number): CachedUpstreamToken | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (e.usableUntil <= nowMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return e;
  }

  /** Keeps the token when it lives longer than the margin (else it is used for its one request only). */
  set(
    key: string,
    owner: TokenOwner,
    token: string,
    expiresIn: number | undefined,
    obtainedAt: number,
  ): void {
    if (expiresIn === undefined || expiresIn <= EXPIRY_MARGIN_SECONDS) return;
    // An exchange that started at or before the user's disconnect may answer the dropped grant's token.
    const disconnectedAt = this.#disconnects.get(`${owner.connection}\n${owner.email.toLowerCase()}`);
    if (disconnectedAt !== undefined && obtainedAt <= disconnectedAt) return;
    if (this.#entries.size >= MAX_ENTRIES && !this.#entries.has(key)) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    // Re-inserted at the end: the map's order is the order of arrival, the eviction order above.
    this.#entries.delete(key);
    this.#entries.set(key, {
      token,
      sha256: identityValueSha256(token),
      usableUntil: (obtainedAt + expiresIn - EXPIRY_MARGIN_SECONDS) * 1000,
      obtainedAt,
      sub: owner.sub,
      email: owner.email,
      actors: owner.actors,
    });
  }

  /** Forgets `key`'s entry if it still holds `token` (a newer token exchanged meanwhile is kept). */
  drop(key: string, token: string): void {
    if (this.#entries.get(key)?.token === token) this.#entries.delete(key);
  }

  /**
   * A revocation published by the IdP: a subject cut-off (the user's `sub`, or a machine client's id acting in a
   * delegated token) or an email cut-off drops every entry obtained at or before it. A jti revocation concerns
   * one platform token, not the user's upstream grant.
   */
  revoked(event: RevocationEvent): void {
    if ('jti' in event) return;
    const { cutoff } = event;
    for (const [key, e] of this.#entries) {
      if (e.obtainedAt > cutoff) continue;
      const hit =
        'sub' in event ? e.sub === event.sub || e.actors.includes(event.sub) : e.email === event.email;
      if (hit) this.#entries.delete(key);
    }
  }

  /**
   * The user disconnected `connection` at the IdP: none of their tokens of it is served again (any actor chain),
   * nor kept from an exchange that started at or before `nowSeconds`.
   */
  disconnected(event: ConnectionDropped, nowSeconds = Date.now() / 1000): void {
    for (const [k, at] of this.#disconnects)
      if (at + DISCONNECT_MEMORY_SECONDS < nowSeconds) this.#disconnects.delete(k);
    this.#disconnects.set(`${event.connection}\n${event.email}`, Math.floor(nowSeconds));
    const prefix = `${event.connection}\n`;
    for (const [key, e] of this.#entries)
      if (key.startsWith(prefix) && e.email.toLowerCase() === event.email) this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
    this.#disconnects.clear();
  }
}
