import type { KeyObject } from 'node:crypto';
import type { Logger } from '../../lib/logger.ts';
import type { JwksHttpClient } from './http-client.ts';
import { parseJwks } from './parse-jwks.ts';
import { type JwksStore, jwksTtlSeconds } from './store.ts';

export interface KeySetOptions {
  issuer: string;
  /** The key set's URL; may fetch discovery the first time (platform issuer without PLATFORM_JWKS_URL). */
  resolveUrl: () => Promise<string>;
  http: JwksHttpClient;
  /** Shared cache of the replicas (Redis); undefined in single-process mode. */
  store: JwksStore | undefined;
  /** Minimum interval between fetches forced by an unknown kid. */
  cooldownMs: number;
  log: Logger;
  /** Told the outcome of every HTTP fetch of the set (metrics); not of reads from the shared Redis copy. */
  onFetch?: (outcome: 'ok' | 'failed') => void;
  /** Called when a refresh drops a kid that was trusted before (a withdrawn key). */
  onKeysRemoved?: () => void;
}

const MIN_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 5 * 60_000;
/**
 * A kid named withdrawn by a key notice (lib/key-notices.ts) is refused this long even if a fetch still lists
 * it: an IdP replica that has not yet re-read its keys may serve the old set for a poll interval (≤ 30 s).
 */
export const WITHDRAWN_HOLD_MS = 120_000;
/** After a withdrawal, the set is refetched until it names the new signing kid: this many tries, this far apart. */
const WITHDRAW_REFETCH_TRIES = 10;
const WITHDRAW_REFETCH_GAP_MS = 500;

/**
 * One issuer's verification keys: an in-process map in front of the shared Redis copy in front of HTTP.
 *
 * - A known kid is a synchronous map lookup (the hot path); a stale set (older than the 1 h TTL) is refreshed
 *   in the background while the old keys keep working.
 * - An unknown kid forces a refresh, but at most one per cooldown, and concurrent misses share it: a flood of
 *   random kids costs one fetch per cooldown, not one per request.
 * - A failed fetch keeps the last good keys and backs off exponentially (1 s … 5 min).
 * - The set is kept for the response's Cache-Control max-age (1 s … 1 h; none: 1 h).
 * - withdraw() (a key notice) drops kids at once and refetches over HTTP, past the shared copy.
 */
export class KeySet {
  readonly issuer: string;
  readonly #opts: KeySetOptions;
  #keys = new Map<string, KeyObject>();
  #loaded = false;
  /** ms epoch after which the set is refreshed in the background. */
  #staleAt = 0;
  /** ms epoch of the last HTTP fetch attempt (the cooldown is counted from here). */
  #lastFetch = Number.NEGATIVE_INFINITY;
  /** ms epoch before which no fetch is attempted after a failure. */
  #retryAt = 0;
  #backoffMs = MIN_BACKOFF_MS;
  #inflight: Promise<void> | undefined;
  /** kid → ms epoch until which it is refused whatever a fetch says (withdraw()). */
  readonly #withdrawn = new Map<string, number>();

  constructor(opts: KeySetOptions) {
    this.issuer = opts.issuer;
    this.#opts = opts;
  }

  /** True once a key set was obtained; until then an unknown kid means "cannot check", not "bad token". */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** The key for `kid`, synchronously when cached; undefined when the issuer does not publish it. */
  key(kid: string): KeyObject | undefined | Promise<KeyObject | undefined> {
    const k = this.#keys.get(kid);
    if (k !== undefined) {
      if (Date.now() >= this.#staleAt) this.#refreshInBackground();
      return k;
    }
    return this.#miss(kid);
  }

  /**
   * A key notice: `kids` are refused from now on (and for WITHDRAWN_HOLD_MS whatever a fetch says), and the set
   * is fetched again from the issuer, skipping the shared Redis copy, until it names `signing` (when given). A
   * notice without kids only makes the set stale, so the next request refreshes it in the background.
   */
  withdraw(kids: readonly string[], signing: string | undefined): Promise<void> {
    if (kids.length === 0) {
      this.#staleAt = 0;
      return Promise.resolve();
    }
    const until = Date.now() + WITHDRAWN_HOLD_MS;
    for (const kid of kids) this.#withdrawn.set(kid, until);
    this.#install(new Map([...this.#keys].filter(([kid]) => !kids.includes(kid))), this.#staleAt);
    const run = async () => {
      await this.#inflight?.catch(() => {});
      for (let i = 0; i < WITHDRAW_REFETCH_TRIES; i++) {
        await this.#refresh(undefined, { skipShared: true });
        if (signing === undefined || this.#keys.has(signing)) return;
        await new Promise((r) => setTimeout(r, WITHDRAW_REFETCH_GAP_MS));
      }
    };
    const p = run().finally(() => {
      if (this.#inflight === p) this.#inflight = undefined;
    });
    this.#inflight = p;
    return p;
  }

  /**
   * Readiness: true once a set was obtained; until then starts a fetch (unless backing off after a failure)
   * and answers whether it brought one.
   */
  async ensureLoaded(): Promise<boolean> {
    if (this.#loaded) return true;
    if (this.#inflight === undefined && Date.now() >= this.#retryAt) this.#start(undefined);
    await this.#inflight;
    return this.#loaded;
  }

  /** Waits for any refresh in progress (tests and start-up warm-up). */
  async settled(): Promise<void> {
    await this.#inflight;
  }

  #miss(kid: string): Promise<KeyObject | undefined> | undefined {
    if (this.#inflight === undefined) {
      const now = Date.now();
      if (this.#loaded && now < this.#lastFetch + this.#opts.cooldownMs) return undefined;
      if (now < this.#retryAt) return undefined;
      this.#start(kid);
    }
    return this.#inflight!.then(() => this.#keys.get(kid));
  }

  #refreshInBackground(): void {
    if (this.#inflight !== undefined || Date.now() < this.#retryAt) return;
    this.#start(undefined);
  }

  #start(wantedKid: string | undefined): void {
    this.#inflight = this.#refresh(wantedKid).finally(() => {
      this.#inflight = undefined;
    });
  }

  async #refresh(wantedKid: string | undefined, opts: { skipShared?: boolean } = {}): Promise<void> {
    const { store, issuer, log } = this.#opts;
    // Another replica may already have fetched the set (or the rotated one): take it from Redis when it is
    // there and, for an unknown kid, actually contains that kid.
    if (store && !opts.skipShared) {
      const shared = await store.read(issuer);
      if (shared) {
        try {
          const keys = parseJwks(shared.json);
          if (wantedKid === undefined || keys.has(wantedKid)) {
            this.#install(keys, Date.now() + shared.ttlMs);
            return;
          }
        } catch {
          // a corrupt shared copy is ignored and overwritten below
        }
      }
    }
    this.#lastFetch = Date.now();
    let url = '';
    try {
      url = await this.#opts.resolveUrl();
      const { text, maxAgeSeconds } = await this.#opts.http.get(url);
      const keys = parseJwks(text);
      const ttlSeconds = jwksTtlSeconds(maxAgeSeconds);
      this.#install(keys, Date.now() + ttlSeconds * 1000);
      this.#retryAt = 0;
      this.#backoffMs = MIN_BACKOFF_MS;
      // resource-server-contract.md check 7: the key-set fetch shows HTTP 200 in the log.
      log.info({ issuer, url, status: 200, kids: [...keys.keys()] }, 'jwks fetched');
      this.#opts.onFetch?.('ok');
      if (store) await store.write(issuer, text, ttlSeconds);
    } catch (err) {
      this.#retryAt = Date.now() + this.#backoffMs;
      this.#opts.onFetch?.('failed');
      log.warn(
        {
          issuer,
          url,
          err: { message: (err as Error).message },
          retryInMs: this.#backoffMs,
          keptKids: this.#keys.size,
        },
        'jwks fetch failed; keeping the last good keys',
      );
      this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
    }
  }

  #install(keys: Map<string, KeyObject>, staleAt: number): void {
    const now = Date.now();
    for (const [kid, until] of this.#withdrawn) {
      if (until <= now) this.#withdrawn.delete(kid);
      else keys.delete(kid);
    }
    let removed = false;
    for (const kid of this.#keys.keys()) if (!keys.has(kid)) removed = true;
    this.#keys = keys;
    this.#loaded = true;
    this.#staleAt = staleAt;
    if (removed) this.#opts.onKeysRemoved?.();
  }
}

/** The JWKS URL from an issuer's OpenID discovery document, fetched once and remembered. */
export function discoveredJwksUrl(issuer: string, http: JwksHttpClient): () => Promise<string> {
  let url: string | undefined;
  return async () => {
    if (url !== undefined) return url;
    const text = await http.getText(`${issuer}/.well-known/openid-configuration`);
    let doc: { jwks_uri?: unknown };
    try {
      doc = JSON.parse(text) as { jwks_uri?: unknown };
    } catch {
      throw new Error('discovery document is not JSON');
    }
    if (typeof doc.jwks_uri !== 'string' || !/^https?:\/\//.test(doc.jwks_uri)) {
      throw new Error('discovery document has no http(s) jwks_uri');
    }
    url = doc.jwks_uri;
    return url;
  };
}
