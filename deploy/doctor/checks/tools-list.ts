import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type CheckRow, fail, pass, skip } from '../result.ts';
import { guarded, resourceOf, type ServiceTarget } from './target.ts';

const CLIENT_INFO = { name: 'platform-doctor', version: '1' };

/**
 * #14 as far as it can be checked without a connector: with a token, an MCP client session through the public
 * URL (initialize, then tools/list) shows a non-empty tool list — what the connector shows on success.
 */
export function checkToolsList(t: ServiceTarget, token: string | undefined): Promise<CheckRow> {
  const id = { ref: '#14', subject: t.service, name: 'tools/list with a token' };
  if (token === undefined) {
    return Promise.resolve(skip(id, 'no token: set PLATFORM_TOKEN (e.g. PLATFORM_TOKEN=$(platform token))'));
  }
  const url = resourceOf(t);
  return guarded(id, async () => {
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: withDeadline(t.timeoutMs),
      // A failed stream is a finding to report, not something to retry in the background.
      reconnectionOptions: {
        maxReconnectionDelay: 0,
        initialReconnectionDelay: 0,
        reconnectionDelayGrowFactor: 1,
        maxRetries: 0,
      },
    });
    const client = new Client(CLIENT_INFO);
    try {
      await client.connect(transport, { timeout: t.timeoutMs });
      const { tools } = await client.listTools(undefined, { timeout: t.timeoutMs });
      if (tools.length === 0) return fail(id, `${url}: tools/list answered an empty list`);
      const names = tools.map((tool) => tool.name);
      return pass(id, `${names.length} tool(s): ${names.join(', ')}`);
    } catch (err) {
      return fail(id, `${url}: ${describeMcpError(err)}`);
    } finally {
      // End the session politely (DELETE); neither step may hide the verdict.
      await transport.terminateSession().catch(() => {});
      await client.close().catch(() => {});
    }
  });
}

/** Every request of the session under the doctor's deadline, so a stalled server cannot hold the run open. */
function withDeadline(timeoutMs: number): FetchLike {
  return (input, init) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
    return fetch(input, { ...init, signal });
  };
}

function describeMcpError(err: unknown): string {
  if (err instanceof StreamableHTTPError && err.code !== undefined && err.code > 0) {
    const body = /(\{.*\})\s*$/s.exec(err.message)?.[1];
    try {
      const e = (JSON.parse(body ?? '') as { error?: { code?: string; context?: { reason?: string } } })
        .error;
      if (e?.code)
        return `answered ${err.code} ${e.code}${e.context?.reason ? ` (${e.context.reason})` : ''}`;
    } catch {
      // not the gateway's JSON error body
    }
    return `answered ${err.code}: ${err.message}`;
  }
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(err)}${cause ? ` (${cause})` : ''}`;
}
