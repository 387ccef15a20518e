import {
  Client,
  type FetchLike,
  SdkHttpError,
  StreamableHTTPClientTransport,
  withDpop,
} from '@modelcontextprotocol/client';
import type { DpopKey } from '../../../cli/client/dpop.ts';
import { type CheckRow, fail, pass, skip } from '../result.ts';
import { guarded, resourceOf, type ServiceTarget } from './target.ts';

const CLIENT_INFO = { name: 'platform-doctor', version: '1' };

/**
 * #14 as far as it can be checked without a connector: with a token, an MCP client through the public URL
 * (2026-07-28 discovery or the initialize handshake, then tools/list) shows a non-empty tool list — what the connector shows on success.
 */
export function checkToolsList(
  t: ServiceTarget,
  token: string | undefined,
  dpop?: DpopKey,
): Promise<CheckRow> {
  const id = { ref: '#14', subject: t.service, name: 'tools/list with a token' };
  if (token === undefined) {
    return Promise.resolve(skip(id, 'no token: set PLATFORM_TOKEN (e.g. PLATFORM_TOKEN=$(platform token))'));
  }
  const url = resourceOf(t);
  return guarded(id, async () => {
    const seen: Refusal = {};
    const deadline = withDeadline(t.timeoutMs, seen);
    // A token bound to the stored login's key (`platform login` binds by default) goes as `Authorization: DPoP`
    // with a proof per request, as `platform call` sends it; any other as Bearer.
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      ...(dpop ? {} : { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
      fetch: dpop ? (withDpop(dpop.session, () => token)(deadline) as FetchLike) : deadline,
      // A failed stream is a finding to report, not something to retry in the background.
      reconnectionOptions: {
        maxReconnectionDelay: 0,
        initialReconnectionDelay: 0,
        reconnectionDelayGrowFactor: 1,
        maxRetries: 0,
      },
    });
    // 2026-07-28 first (server/discover), the initialize handshake for an older server.
    const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(transport, { timeout: t.timeoutMs });
      const { tools } = await client.listTools(undefined, { timeout: t.timeoutMs });
      if (tools.length === 0) return fail(id, `${url}: tools/list answered an empty list`);
      const names = tools.map((tool) => tool.name);
      return pass(id, `${names.length} tool(s): ${names.join(', ')}`);
    } catch (err) {
      return fail(id, `${url}: ${describeMcpError(err, seen)}`);
    } finally {
      // End the session politely (DELETE); neither step may hide the verdict.
      await transport.terminateSession().catch(() => {});
      await client.close().catch(() => {});
    }
  });
}

/** The last refused answer's status and body (the SDK's error does not always carry the body). */
interface Refusal {
  status?: number;
  body?: string;
}

/**
 * Every request under the doctor's deadline, so a stalled server cannot hold the run open; the last refusal is
 * kept for the verdict.
 */
function withDeadline(timeoutMs: number, seen: Refusal): FetchLike {
  return async (input, init) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
    const res = await fetch(input, { ...init, signal });
    if (res.status >= 400) {
      seen.status = res.status;
      seen.body = await res
        .clone()
        .text()
        .catch(() => '');
    } else {
      seen.status = undefined;
      seen.body = undefined;
    }
    return res;
  };
}

function describeMcpError(err: unknown, seen: Refusal): string {
  if (err instanceof SdkHttpError && err.status > 0) {
    const body = seen.status === err.status ? seen.body : /(\{.*\})\s*$/s.exec(err.message)?.[1];
    try {
      const e = (JSON.parse(body ?? '') as { error?: { code?: string; context?: { reason?: string } } })
        .error;
      if (e?.code)
        return `answered ${err.status} ${e.code}${e.context?.reason ? ` (${e.context.reason})` : ''}`;
    } catch {
      // not the gateway's JSON error body
    }
    return `answered ${err.status}: ${err.message}`;
  }
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(err)}${cause ? ` (${cause})` : ''}`;
}
