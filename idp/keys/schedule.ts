import { STATIC_JWKS_MAX_AGE_SECONDS } from '../config.ts';
import { ACCESS_TTL_SECONDS } from '../store/refresh-tokens.ts';

// The rotation schedule as pure functions of the stored timestamps and the clock, so every replica that has
// read the same rows agrees on which key signs without asking anyone (docs/idp.md § Signing-key rotation).

/** The clock leeway services allow on `exp` (gateway/auth/claims.ts): a token verifies this long past it. */
export const VERIFY_LEEWAY_SECONDS = 60;
/**
 * How long a key stays published after it stopped signing: the longest token it signed (access and ID tokens
 * share ACCESS_TTL_SECONDS) plus the services' leeway.
 */
export const RETENTION_SECONDS = ACCESS_TTL_SECONDS + VERIFY_LEEWAY_SECONDS;

export type KeyState = 'scheduled' | 'next' | 'current' | 'previous' | 'expired' | 'withdrawn';

/** One stored key's timestamps (ms since the epoch). */
export interface KeyTimes {
  kid: string;
  publishAt: number;
  activateAt: number;
  withdrawnAt: number | undefined;
}

export interface DerivedKey {
  kid: string;
  state: KeyState;
  /** When a later key took over (undefined: still current, next, or withdrawn before that). */
  retiredAt: number | undefined;
  /** When it stops being published (retiredAt + retention); undefined while it signs or is next. */
  unpublishAt: number | undefined;
}

export interface Derived {
  keys: Map<string, DerivedKey>;
  current: string | undefined;
  /** The published kids: next, current, previous (never expired or withdrawn). */
  published: string[];
  /** The next instant at which any state changes (activation or unpublication); Infinity if none is due. */
  changesAt: number;
}

/** Activation order; ties (never made by the IdP) go to the later-published key, then the kid. */
function byActivation(a: KeyTimes, b: KeyTimes): number {
  return a.activateAt - b.activateAt || a.publishAt - b.publishAt || (a.kid < b.kid ? -1 : 1);
}

export function deriveStates(
  rows: readonly KeyTimes[],
  now: number,
  retentionMs = RETENTION_SECONDS * 1000,
): Derived {
  const keys = new Map<string, DerivedKey>();
  // A withdrawal takes effect when it is read, whatever the clocks say: it is never scheduled ahead.
  const live = rows.filter((r) => r.withdrawnAt === undefined).sort(byActivation);
  let changesAt = Number.POSITIVE_INFINITY;
  const activated = live.filter((r) => r.activateAt <= now);
  // Nothing activated yet by this clock (a replica whose clock is behind the one that made an emergency key):
  // the first key to activate signs, rather than none.
  const current = activated.at(-1) ?? live[0];
  for (let i = 0; i < live.length; i++) {
    const r = live[i]!;
    const successor = live[i + 1];
    if (r.activateAt > now && r !== current) {
      changesAt = Math.min(changesAt, r.activateAt);
      if (r.publishAt > now) changesAt = Math.min(changesAt, r.publishAt);
      keys.set(r.kid, {
        kid: r.kid,
        state: r.publishAt <= now ? 'next' : 'scheduled',
        retiredAt: undefined,
        unpublishAt: undefined,
      });
      continue;
    }
    if (r === current) {
      keys.set(r.kid, { kid: r.kid, state: 'current', retiredAt: undefined, unpublishAt: undefined });
      continue;
    }
    // Activated and superseded: successor is defined and active.
    const retiredAt = successor!.activateAt;
    const unpublishAt = retiredAt + retentionMs;
    if (unpublishAt > now) changesAt = Math.min(changesAt, unpublishAt);
    keys.set(r.kid, {
      kid: r.kid,
      state: unpublishAt > now ? 'previous' : 'expired',
      retiredAt,
      unpublishAt,
    });
  }
  for (const r of rows) {
    if (keys.has(r.kid)) continue;
    keys.set(r.kid, { kid: r.kid, state: 'withdrawn', retiredAt: undefined, unpublishAt: undefined });
  }
  const published = [...keys.values()]
    .filter((k) => k.state === 'next' || k.state === 'current' || k.state === 'previous')
    .map((k) => k.kid);
  return { keys, current: current?.kid, published, changesAt };
}

/**
 * The key set's Cache-Control max-age: a quarter of the publish-ahead margin (at most the static 300 s), so a
 * cache filled just before a key was announced is refreshed well before that key signs.
 */
export function jwksMaxAge(publishAheadSeconds: number | undefined): number {
  if (publishAheadSeconds === undefined) return STATIC_JWKS_MAX_AGE_SECONDS;
  return Math.max(1, Math.min(STATIC_JWKS_MAX_AGE_SECONDS, Math.floor(publishAheadSeconds / 4)));
}

/** How often a replica re-reads the key table (besides the Redis notices): a quarter of the margin, 1–30 s. */
export function pollSeconds(publishAheadSeconds: number): number {
  return Math.max(1, Math.min(30, Math.floor(publishAheadSeconds / 4)));
}

/** When the current key's successor must be created (it then signs at activateAt + lifetime). */
export function nextKeyDueAt(currentActivateAt: number, lifetimeMs: number, publishAheadMs: number): number {
  return currentActivateAt + lifetimeMs - publishAheadMs;
}
