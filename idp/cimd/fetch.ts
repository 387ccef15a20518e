import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector, request } from 'undici';
import { type HostPattern, matchHost } from '../../lib/host-patterns.ts';
import { InvalidClientError } from '../errors.ts';
import { isRefusedAddress } from './addresses.ts';

export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export interface FetchPolicy {
  /** PLATFORM_CIMD_ALLOWED_HOSTS; empty: any host whose addresses are public. */
  allowedHosts: readonly HostPattern[];
  /** An extra CA (PEM) trusted besides the system roots (PLATFORM_CIMD_CA_FILE). */
  ca?: string;
  /** Name resolution; tests inject one. Defaults to the system resolver (every address it returns). */
  resolve?: Resolver;
  timeoutMs?: number;
  maxBytes?: number;
  /**
   * Told why a host was refused (what it resolved to): for the log only. The error the client sees says just
   * that the host is not allowed, so it cannot be used to learn how names resolve inside the network.
   */
  onHostRefused?: (host: string, detail: string) => void;
}

/** The one answer for a host that does not resolve, or resolves to an address the rule refuses. */
export const HOST_NOT_ALLOWED = "the metadata document's host is not allowed";

export const DEFAULT_TIMEOUT_MS = 3000;
export const DEFAULT_MAX_BYTES = 5 * 1024;

export interface Fetched {
  body: unknown;
  cacheControl: string | undefined;
}

const systemResolve: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** The URL's host is one the operator allows; when named exactly (no wildcard), its addresses are not judged. */
export function hostPolicy(
  allowedHosts: readonly HostPattern[],
  hostname: string,
  port: string,
): { allowed: boolean; exempt: boolean } {
  if (allowedHosts.length === 0) return { allowed: true, exempt: false };
  const p = matchHost(allowedHosts, hostname, port);
  return { allowed: p !== undefined, exempt: p?.exact === true };
}

/**
 * The metadata-document fetcher: undici with its own connector. For every connection it resolves the host,
 * refuses the connection when any resolved address is private, loopback, link-local, unique-local, CGNAT or
 * multicast (unless the operator named the host exactly), and then connects to the checked address itself,
 * so a second, different DNS answer can never be what the socket reaches. TLS still verifies the host name.
 */
export function createMetadataFetcher(policy: FetchPolicy) {
  const resolve = policy.resolve ?? systemResolve;
  const timeoutMs = policy.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = policy.maxBytes ?? DEFAULT_MAX_BYTES;
  const base = buildConnector({
    ...(policy.ca ? { ca: [...rootCertificates, policy.ca] } : {}),
    timeout: timeoutMs,
    allowH2: false,
  });
  const connect: buildConnector.connector = (opts, callback) => {
    const name = opts.hostname.replace(/^\[(.*)\]$/, '$1');
    // As in a URL, the default port is written as none (a pattern without a port means the default one).
    const port = String(opts.port ?? '') === '443' ? '' : String(opts.port ?? '');
    const { exempt } = hostPolicy(policy.allowedHosts, opts.hostname, port);
    const addresses: Promise<ReadonlyArray<{ address: string }>> = isIP(name)
      ? Promise.resolve([{ address: name }])
      : resolve(name);
    addresses.then(
      (list) => {
        if (list.length === 0) return callback(new RefusedAddressError(`${name} has no address`), null);
        const refused = list.find((a) => isRefusedAddress(a.address));
        if (refused && !exempt) {
          return callback(
            new RefusedAddressError(`${name} resolves to ${refused.address}, a non-public address`),
            null,
          );
        }
        base(
          {
            ...opts,
            hostname: list[0]!.address,
            // TLS verifies the certificate against the name, not the address the socket was pinned to.
            servername: isIP(name) ? undefined : name,
          },
          callback,
        );
      },
      (err: Error) => callback(new RefusedAddressError(`${name} does not resolve: ${err.message}`), null),
    );
  };
  const agent = new Agent({ connect, keepAliveTimeout: 1000, connections: 16 });

  return {
    /** GETs the document; every failure is `invalid_client` saying why, never an internal error. */
    async fetch(url: URL): Promise<Fetched> {
      const { allowed } = hostPolicy(policy.allowedHosts, url.hostname, url.port);
      if (!allowed) throw new InvalidClientError(`client_id host ${url.host} is not allowed here`);
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await request(url, {
          dispatcher: agent,
          method: 'GET',
          headers: { accept: 'application/json' },
          signal,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        try {
          if (res.statusCode >= 300 && res.statusCode < 400)
            throw new InvalidClientError('client metadata document: redirects are not followed');
          if (res.statusCode !== 200)
            throw new InvalidClientError(`client metadata document: HTTP ${res.statusCode}`);
          const declared = Number(res.headers['content-length']);
          if (Number.isFinite(declared) && declared > maxBytes)
            throw new InvalidClientError(`client metadata document exceeds ${maxBytes} bytes`);
          const chunks: Buffer[] = [];
          let size = 0;
          for await (const chunk of res.body) {
            size += (chunk as Buffer).length;
            // Stop reading at the limit rather than buffering whatever the server chooses to send.
            if (size > maxBytes)
              throw new InvalidClientError(`client metadata document exceeds ${maxBytes} bytes`);
            chunks.push(chunk as Buffer);
          }
          let body: unknown;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            throw new InvalidClientError('client metadata document is not JSON');
          }
          const cc = res.headers['cache-control'];
          return { body, cacheControl: Array.isArray(cc) ? cc.join(', ') : cc };
        } finally {
          // Whatever was not read is discarded (the connection with it); the abort is expected, not an error.
          res.body.on('error', () => {});
          res.body.destroy();
        }
      } catch (err) {
        if (err instanceof InvalidClientError) throw err;
        const refused = refusedAddress(err);
        if (refused && !signal.aborted) {
          policy.onHostRefused?.(url.host, refused.message);
          throw new InvalidClientError(HOST_NOT_ALLOWED);
        }
        throw new InvalidClientError(
          `client metadata document could not be fetched: ${describe(err, signal)}`,
        );
      }
    },
    close: () => agent.close(),
  };
}

export type MetadataFetcher = ReturnType<typeof createMetadataFetcher>;

class RefusedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedAddressError';
  }
}

function refusedAddress(err: unknown): RefusedAddressError | undefined {
  if (err instanceof RefusedAddressError) return err;
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  return cause instanceof RefusedAddressError ? cause : undefined;
}

/** A public address that did not answer as expected: its code (ECONNREFUSED…), never an address. */
function describe(err: unknown, signal: AbortSignal): string {
  if (signal.aborted) return 'timed out';
  const e = err as { code?: string; message?: string };
  return e?.code ?? e?.message ?? 'error';
}

/** A document is kept no longer than this, whatever its Cache-Control says. */
export const MAX_CACHE_SECONDS = 24 * 3600;
/** A document without Cache-Control (or without max-age) is kept this long. */
export const DEFAULT_CACHE_SECONDS = 300;

/** Seconds the document may be kept: no-store / no-cache → 0; max-age → at most 24 h; absent → 5 min. */
export function cacheSeconds(cacheControl: string | undefined): number {
  if (!cacheControl) return DEFAULT_CACHE_SECONDS;
  const directives = cacheControl
    .toLowerCase()
    .split(',')
    .map((d) => d.trim());
  if (directives.some((d) => d === 'no-store' || d === 'no-cache' || d === 'private')) return 0;
  const maxAge = directives.find((d) => d.startsWith('max-age='));
  if (!maxAge) return DEFAULT_CACHE_SECONDS;
  const n = Number(maxAge.slice('max-age='.length).replace(/"/g, ''));
  if (!Number.isFinite(n) || n < 0) return 0;
  return Math.min(Math.floor(n), MAX_CACHE_SECONDS);
}
