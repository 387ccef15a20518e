import type { IncomingMessage } from 'node:http';

// The outbound-fetch budget (docs/idp.md § Outbound fetches): every fetch the IdP makes because a request asked
// for it — a client metadata document, a private_key_jwt client's jwks_uri, a trusted issuer's key set, an
// upstream authorization server's metadata — goes through one budget, so no anonymous request can make the IdP
// an outbound-request amplifier:
// - each network fetch is counted once per client address (`cimd` in PLATFORM_RATE_LIMITS) and once per host
//   (`cimd_host`), shared by every kind of fetch and (with Redis) by every replica;
// - a fetch of a URL that failed (network error, HTTP error, a body its caller refused) or whose answer may not
//   be cached (no-store, no-cache, private, max-age=0) is not made again for that URL within COOL_DOWN_SECONDS:
//   the failure is answered again, or the uncacheable answer reused, without a fetch;
// - concurrent requests for one URL share one fetch.
// Caching answers that may be cached stays with the caller (each kind has its own rules and lifetime).

/**
 * Called before each network fetch (not for a cached answer, a cool-down or a fetch already in flight); throwing
 * refuses the fetch (a rate-limited request: 429). Tests pass `async () => {}`.
 */
export type FetchGate = (url: URL) => Promise<void>;

/** The gate for a request: one fetch counted for its client address, then for the URL's host. */
/** What the budget counts with: the IdP's rate limiter (idp/rate-limit.ts), its two fetch counters. */
export interface FetchCounters {
  consume(endpoint: 'cimd', req: IncomingMessage): Promise<void>;
  consumeKey(endpoint: 'cimd_host', key: string): Promise<void>;
}

export function countedFetches(limiter: FetchCounters, req: IncomingMessage | undefined): FetchGate {
  return async (url) => {
    if (req) await limiter.consume('cimd', req);
    await limiter.consumeKey('cimd_host', url.host);
  };
}

/** How long a failed or uncacheable fetch of a URL is not repeated. */
export const COOL_DOWN_SECONDS = 30;
/** Cool-down entries kept at most (the oldest is dropped first); a dropped one only allows one more fetch. */
const MAX_ENTRIES = 10_000;

/** What a load returns: its value and how long the caller may keep it (0: no-store and the like). */
export interface Loaded<T> {
  value: T;
  cacheSeconds: number;
}

export interface OutboundBudget {
  /**
   * Fetches `url` through `load` within the budget: during a cool-down of that URL, the last failure is thrown
   * again or the last uncacheable value returned, with no fetch and nothing counted; else one fetch shared by
   * concurrent callers, after `gate` counted it. A refusal by the gate starts no cool-down.
   */
  fetch<T>(url: URL, gate: FetchGate, load: (url: URL) => Promise<Loaded<T>>): Promise<T>;
}

export function createOutboundBudget(
  o: { now?: () => number; coolDownSeconds?: number } = {},
): OutboundBudget {
  const now = o.now ?? Date.now;
  const coolDownMs = (o.coolDownSeconds ?? COOL_DOWN_SECONDS) * 1000;
  const cooling = new Map<string, { until: number; outcome: { error: unknown } | { value: unknown } }>();
  const inFlight = new Map<string, Promise<unknown>>();

  function coolDown(href: string, outcome: { error: unknown } | { value: unknown }): void {
    cooling.delete(href);
    if (cooling.size >= MAX_ENTRIES) cooling.delete(cooling.keys().next().value!);
    cooling.set(href, { until: now() + coolDownMs, outcome });
  }

  async function run<T>(url: URL, load: (url: URL) => Promise<Loaded<T>>): Promise<T> {
    let loaded: Loaded<T>;
    try {
      loaded = await load(url);
    } catch (error) {
      coolDown(url.href, { error });
      throw error;
    }
    if (loaded.cacheSeconds > 0) cooling.delete(url.href);
    else coolDown(url.href, { value: loaded.value });
    return loaded.value;
  }

  return {
    async fetch<T>(url: URL, gate: FetchGate, load: (url: URL) => Promise<Loaded<T>>): Promise<T> {
      const href = url.href;
      const cool = cooling.get(href);
      if (cool && cool.until > now()) {
        if ('error' in cool.outcome) throw cool.outcome.error;
        return cool.outcome.value as T;
      }
      if (cool) cooling.delete(href);
      let p = inFlight.get(href) as Promise<T> | undefined;
      if (!p) {
        await gate(url);
        // Checked again: another request may have started the same fetch while the gate was counting.
        p = inFlight.get(href) as Promise<T> | undefined;
        if (!p) {
          p = run(url, load).finally(() => inFlight.delete(href));
          inFlight.set(href, p);
        }
      }
      return p;
    },
  };
}
