import { matchHostHeader } from '../lib/host-patterns.ts';
import type { ServiceConfig } from './config.ts';
import { InvalidHostError, InvalidOriginError } from './errors.ts';

// A deployment sees a handful of Host values, so each answer is remembered rather than re-parsed on every
// request; bounded, because the header is the client's to choose.
const MEMO_LIMIT = 256;

/**
 * DNS-rebinding guard (the MCP transport's allowed hosts) for one service: a request whose Host header is not
 * one the service answers for is refused with 421 before anything else happens.
 */
export function createHostGuard(service: ServiceConfig): (host: string | undefined) => void {
  const seen = new Map<string, boolean>();
  return (host) => {
    if (host === undefined) throw new InvalidHostError();
    let ok = seen.get(host);
    if (ok === undefined) {
      ok = matchHostHeader(service.allowedHosts, host);
      if (seen.size < MEMO_LIMIT) seen.set(host, ok);
    }
    if (!ok) throw new InvalidHostError();
  };
}

/** A browser request from a page of another origin is refused (403); requests without Origin pass. */
export function checkOrigin(service: ServiceConfig, origin: string | undefined): void {
  if (origin !== undefined && !service.allowedOrigins.has(origin.toLowerCase()))
    throw new InvalidOriginError();
}
