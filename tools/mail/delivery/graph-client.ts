import type { Logger } from '../../../lib/logger.ts';
import type { GraphConfig } from '../../config.ts';
import { DependencyUnavailableError, ToolError } from '../../kit/tool-errors.ts';

/** Graph (or its token endpoint) answered a 4xx: the request itself or the app's permissions are wrong. */
export class GraphRejectedError extends ToolError {
  readonly graphStatus: number;
  constructor(graphStatus: number, message: string) {
    super('graph_rejected', message, 422);
    this.graphStatus = graphStatus;
  }
}

export interface GraphClient {
  /** POSTs JSON to `{baseUrl}{path}` with an app-only token; returns the parsed body (undefined when empty). */
  post(path: string, body: unknown, signal?: AbortSignal): Promise<unknown>;
}

export interface GraphClientOptions {
  log: Logger;
  fetch?: typeof globalThis.fetch;
  now?: () => number;
  timeoutMs?: number;
}

// Renew a little before Entra's expiry so a token never expires between the check and Graph's check of it.
const EXPIRY_SKEW_MS = 60_000;
const GRAPH_SCOPE = 'https://graph.microsoft.com/.default';

interface CachedToken {
  value: string;
  expiresAt: number;
}

/** Graph's (or Entra's) error body in one line: `code: message`, or the status alone. */
export async function graphErrorMessage(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text) as {
      error?: { code?: string; message?: string } | string;
      error_description?: string;
    };
    if (typeof j.error === 'object' && j.error)
      return `${j.error.code ?? 'error'}: ${j.error.message ?? ''}`.trim();
    if (typeof j.error === 'string') return `${j.error}: ${j.error_description ?? ''}`.trim();
  } catch {
    // not JSON: fall through to the status alone
  }
  return `HTTP ${res.status}`;
}

/**
 * Microsoft Graph with app-only (client-credentials) tokens. The token is cached until shortly before its
 * expiry, concurrent callers share one token request, and a 401 from Graph drops the cache and retries once —
 * so newly granted permissions (Mail.Send, Calendars.ReadWrite) apply without restarting the server.
 */
export function createGraphClient(config: GraphConfig, opts: GraphClientOptions): GraphClient {
  const doFetch = opts.fetch ?? globalThis.fetch;
  const now = opts.now ?? Date.now;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  let cached: CachedToken | undefined;
  let pending: Promise<string> | undefined;

  // `outcome` says what the caller may assume when the request failed in flight.
  async function send(
    url: string,
    init: RequestInit,
    outcome: string,
    signal?: AbortSignal,
  ): Promise<Response> {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      return await doFetch(url, { ...init, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new DependencyUnavailableError('graph', `Microsoft Graph is unreachable (${cause}); ${outcome}`);
    }
  }

  async function fetchToken(): Promise<string> {
    const res = await send(
      config.tokenUrl,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: config.clientId,
          client_secret: config.clientSecret,
          scope: GRAPH_SCOPE,
        }).toString(),
      },
      'nothing was sent, retry shortly',
    );
    if (res.status >= 500 || res.status === 429) {
      throw new DependencyUnavailableError(
        'graph',
        `the Graph token endpoint answered ${res.status}; nothing was sent, retry shortly`,
      );
    }
    if (!res.ok)
      throw new GraphRejectedError(
        res.status,
        `Graph token request refused: ${await graphErrorMessage(res)}`,
      );
    const body = (await res.json()) as { access_token?: unknown; expires_in?: unknown };
    if (typeof body.access_token !== 'string' || typeof body.expires_in !== 'number') {
      throw new DependencyUnavailableError(
        'graph',
        'the Graph token endpoint answered without a usable token',
      );
    }
    cached = { value: body.access_token, expiresAt: now() + body.expires_in * 1000 - EXPIRY_SKEW_MS };
    opts.log.info({ expiresIn: body.expires_in }, 'graph app token acquired');
    return body.access_token;
  }

  function token(): Promise<string> {
    if (cached && cached.expiresAt > now()) return Promise.resolve(cached.value);
    pending ??= fetchToken().finally(() => {
      pending = undefined;
    });
    return pending;
  }

  async function postOnce(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    return send(
      `${config.baseUrl}${path}`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${await token()}`,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body: JSON.stringify(body),
      },
      'delivery is not confirmed',
      signal,
    );
  }

  return {
    async post(path, body, signal) {
      let res = await postOnce(path, body, signal);
      if (res.status === 401) {
        await res.body?.cancel();
        cached = undefined;
        res = await postOnce(path, body, signal);
      }
      if (res.status >= 500 || res.status === 429) {
        await res.body?.cancel();
        throw new DependencyUnavailableError(
          'graph',
          `Microsoft Graph answered ${res.status}; delivery is not confirmed`,
        );
      }
      if (!res.ok)
        throw new GraphRejectedError(
          res.status,
          `Microsoft Graph refused the request: ${await graphErrorMessage(res)}`,
        );
      const text = await res.text();
      return text ? (JSON.parse(text) as unknown) : undefined;
    },
  };
}
