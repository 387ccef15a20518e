import tls from 'node:tls';
import { Agent, request } from 'undici';

// The one way the doctor talks HTTP: undici with a hard deadline per exchange, redirects not followed (a
// redirect in front of an MCP route is itself a finding), bodies capped, and its own Agent so the sockets it
// opened are destroyed when the run ends instead of keeping the process alive.

export type ProbeErrorCode = 'UNREACHABLE' | 'TIMEOUT';

/** The target could not be asked at all; a check turns this into a FAIL row, never a crash. */
export class ProbeError extends Error {
  readonly code: ProbeErrorCode;
  override readonly name = 'ProbeError';
  constructor(code: ProbeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export interface ProbeRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

export interface ProbeResponse {
  status: number;
  /** Lowercased names; repeated headers joined with ", " (WWW-Authenticate included, RFC 9110 §5.3). */
  headers: ReadonlyMap<string, string>;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

export type Probe = (url: string, init?: ProbeRequest) => Promise<ProbeResponse>;

export interface Prober {
  probe: Probe;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 256 * 1024;

export interface ProberOptions {
  timeoutMs: number;
  /** Extra trusted certificate authority (PEM), beside the system's; tests use a self-signed one. */
  ca?: string;
}

export function createProber(opts: ProberOptions): Prober {
  const agent = new Agent({
    connect: { timeout: opts.timeoutMs, ...(opts.ca ? { ca: [...tls.rootCertificates, opts.ca] } : {}) },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    keepAliveTimeout: 1000,
  });

  async function probe(url: string, init: ProbeRequest = {}): Promise<ProbeResponse> {
    const target = new URL(url);
    const headers = { 'user-agent': 'platform-doctor', ...init.headers };
    // undici takes the TLS server name from a Host header when one is given; a probe that sends a foreign
    // Host must still present the real name in SNI, or TLS fails before the Host guard is ever asked.
    const sendsHost = Object.keys(headers).some((h) => h.toLowerCase() === 'host');
    const sni = target.protocol === 'https:' && sendsHost ? { servername: target.hostname } : {};
    try {
      const res = await request(target, {
        method: init.method ?? 'GET',
        headers,
        body: init.body,
        signal: AbortSignal.timeout(opts.timeoutMs),
        dispatcher: agent,
        ...sni,
      });
      const text = await readCapped(res.body);
      return { status: res.statusCode, headers: flatten(res.headers), text, json: parseJson(text) };
    } catch (err) {
      throw probeError(err, url, opts.timeoutMs);
    }
  }

  return {
    probe,
    async close() {
      await agent.destroy();
    },
  };
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      // Nothing the doctor reads is this large; an endless body (a stream) must not hold the check open.
      body.destroy();
      break;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function flatten(headers: Record<string, string | string[] | undefined>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out.set(k.toLowerCase(), Array.isArray(v) ? v.join(', ') : v);
  }
  return out;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function probeError(err: unknown, url: string, timeoutMs: number): ProbeError {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code;
  if (
    e.name === 'TimeoutError' ||
    e.name === 'AbortError' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    return new ProbeError('TIMEOUT', `no answer from ${url} within ${timeoutMs / 1000} s`, { cause: err });
  }
  return new ProbeError('UNREACHABLE', `cannot reach ${url}: ${code ?? e.message ?? String(err)}`, {
    cause: err,
  });
}
