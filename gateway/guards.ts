import type { HostPattern, ServiceConfig } from './config.ts';
import { InvalidHostError, InvalidOriginError } from './errors.ts';

function splitHost(host: string): { name: string; port: string } {
  const h = host.toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return { name: h.slice(0, end + 1), port: h[end + 1] === ':' ? h.slice(end + 2) : '' };
  }
  const i = h.lastIndexOf(':');
  return i < 0 ? { name: h, port: '' } : { name: h.slice(0, i), port: h.slice(i + 1) };
}

export function hostMatches(patterns: readonly HostPattern[], host: string): boolean {
  const { name, port } = splitHost(host);
  for (const p of patterns) {
    if (p.host === name && (p.port === undefined || p.port === port)) return true;
  }
  return false;
}

/**
 * DNS-rebinding guard (the MCP transport's allowed hosts): a request whose Host header is not one the service
 * answers for is refused with 421 before anything else happens.
 */
export function checkHost(service: ServiceConfig, host: string | undefined): void {
  if (host === undefined || !hostMatches(service.allowedHosts, host)) throw new InvalidHostError();
}

/** A browser request from a page of another origin is refused (403); requests without Origin pass. */
export function checkOrigin(service: ServiceConfig, origin: string | undefined): void {
  if (origin !== undefined && !service.allowedOrigins.has(origin.toLowerCase()))
    throw new InvalidOriginError();
}
