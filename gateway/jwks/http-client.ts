import { Agent, request } from 'undici';

// The key-set HTTP client of resource-server-contract.md § Bearer validation: connect 2.0 s, read 3.0 s,
// write 2.0 s, pool 5.0 s, all four given. undici has knobs for connect (connect.timeout) and read
// (headersTimeout, bodyTimeout); it has none for write or for waiting on a pooled connection, so those two are
// enforced by one overall deadline covering the sum of the four phases.
export const JWKS_TIMEOUTS = Object.freeze({ connectMs: 2000, readMs: 3000, writeMs: 2000, poolMs: 5000 });

/** A JWKS document larger than this is refused: real ones are a few KiB; this bounds a hostile server. */
export const MAX_JWKS_BYTES = 512 * 1024;

/** `max-age=N` of a Cache-Control header (`no-cache`/`no-store` read as 0); undefined without one. */
export function maxAge(header: string | string[] | undefined): number | undefined {
  const v = Array.isArray(header) ? header.join(',') : header;
  if (!v) return undefined;
  if (/(^|[\s,])no-(cache|store)\b/i.test(v)) return 0;
  const m = /(?:^|[\s,])max-age\s*=\s*"?(\d{1,10})"?/i.exec(v);
  return m ? Number(m[1]) : undefined;
}

export class JwksFetchError extends Error {
  override readonly name = 'JwksFetchError';
}

export class JwksHttpClient {
  readonly #agent = new Agent({
    connect: { timeout: JWKS_TIMEOUTS.connectMs },
    headersTimeout: JWKS_TIMEOUTS.readMs,
    bodyTimeout: JWKS_TIMEOUTS.readMs,
    connections: 4,
    keepAliveTimeout: 10_000,
  });

  /** GET `url` expecting 200 and a body of at most MAX_JWKS_BYTES; returns the body text. */
  async getText(url: string): Promise<string> {
    return (await this.get(url)).text;
  }

  /** Like getText, with the response's Cache-Control max-age (undefined when it gives none). */
  async get(url: string): Promise<{ text: string; maxAgeSeconds: number | undefined }> {
    const total =
      JWKS_TIMEOUTS.connectMs + JWKS_TIMEOUTS.readMs + JWKS_TIMEOUTS.writeMs + JWKS_TIMEOUTS.poolMs;
    let res: Awaited<ReturnType<typeof request>>;
    try {
      res = await request(url, {
        dispatcher: this.#agent,
        method: 'GET',
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(total),
      });
    } catch (err) {
      throw new JwksFetchError(`GET ${url} failed: ${(err as Error).message}`);
    }
    if (res.statusCode !== 200) {
      await res.body.dump().catch(() => {});
      throw new JwksFetchError(`GET ${url} answered HTTP ${res.statusCode}`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_JWKS_BYTES) {
          res.body.destroy();
          throw new JwksFetchError(`GET ${url}: body exceeds ${MAX_JWKS_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      if (err instanceof JwksFetchError) throw err;
      throw new JwksFetchError(`GET ${url}: reading the body failed: ${(err as Error).message}`);
    }
    return {
      text: Buffer.concat(chunks).toString('utf8'),
      maxAgeSeconds: maxAge(res.headers['cache-control']),
    };
  }

  async close(): Promise<void> {
    await this.#agent.destroy();
  }
}
