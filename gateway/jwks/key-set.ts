import type { KeyObject } from 'node:crypto';
import type { Logger } from '../../lib/logger.ts';
import type { JwksHttpClient } from './http-client.ts';
import { parseJwks } from './parse-jwks.ts';
import { JWKS_TTL_SECONDS, type JwksStore } from './store.ts';

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
 * One issuer's verification keys: an in-process map in front of the shared Redis copy in front of HTTP.
 *
 * - A known kid is a synchronous map lookup (the hot path); a stale set (older than the 1 h TTL) is refreshed
 *   in the background while the old keys keep working.
 * - An unknown kid forces a refresh, but at most one per cooldown, and concurrent misses share it: a flood of
 *   random kids costs one fetch per cooldown, not one per request.
 * - A failed fetch keeps the last good keys and backs off exponentially (1 s … 5 min).
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

  async #refresh(wantedKid: string | undefined): Promise<void> {
    const { store, issuer, log } = this.#opts;
    // Another replica may already have fetched the set (or the rotated one): take it from Redis when it is
    // there and, for an unknown kid, actually contains that kid.
    if (store) {
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
      const text = await this.#opts.http.getText(url);
      const keys = parseJwks(text);
      this.#install(keys, Date.now() + JWKS_TTL_SECONDS * 1000);
      this.#retryAt = 0;
      this.#backoffMs = MIN_BACKOFF_MS;
      // resource-server-contract.md check 7: the key-set fetch shows HTTP 200 in the log.
      log.info({ issuer, url, status: 200, kids: [...keys.keys()] }, 'jwks fetched');
      this.#opts.onFetch?.('ok');
      if (store) await store.write(issuer, text);
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
