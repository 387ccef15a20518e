import { type Probe, ProbeError, type ProbeResponse } from '../http.ts';
import { type CheckId, type CheckRow, fail } from '../result.ts';

/** One service behind the public base URL, and the way to ask it. */
export interface ServiceTarget {
  baseUrl: string;
  service: string;
  probe: Probe;
  timeoutMs: number;
}

/** `{base_url}/<SERVICE>/mcp`: the identifier URI and resource the spec's registration table requires. */
export const resourceOf = (t: ServiceTarget): string => `${t.baseUrl}/${t.service}/mcp`;

/**
 * The spec derives `resource_metadata` from the identifier URI: drop the trailing `/mcp`, append the
 * `.well-known` path.
 */
export const metadataUrlOf = (t: ServiceTarget): string =>
  `${resourceOf(t).replace(/\/mcp$/, '')}/.well-known/oauth-protected-resource`;

/** A JSON-RPC initialize request: what a connector sends first, so the guards see a realistic request. */
export const INITIALIZE_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'platform-doctor', version: '1' },
  },
});

export const MCP_POST_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
};

/**
 * Runs one check; a target that cannot be asked (refused, timed out) is a FAIL row with the reason, and a
 * fault in the doctor itself is a FAIL row saying so, so one broken check never hides the others.
 */
export async function guarded(id: CheckId, check: () => Promise<CheckRow>): Promise<CheckRow> {
  try {
    return await check();
  } catch (err) {
    if (err instanceof ProbeError) return fail(id, err.message);
    return fail(id, `the check itself failed: ${(err as Error).message ?? String(err)}`);
  }
}

interface ErrorBody {
  code?: unknown;
  message?: unknown;
  context?: { reason?: unknown };
}

/** The spec's error object `{"error":{"code","message","context":{"request_id","reason"}}}`, if present. */
export function errorBody(res: ProbeResponse): ErrorBody | undefined {
  const e = (res.json as { error?: unknown } | undefined)?.error;
  return typeof e === 'object' && e !== null ? (e as ErrorBody) : undefined;
}

/** A response in a few words: status, and the error code and reason when the body has them. */
export function describeResponse(res: ProbeResponse): string {
  const e = errorBody(res);
  if (e && typeof e.code === 'string') {
    const reason = typeof e.context?.reason === 'string' ? ` (${e.context.reason})` : '';
    return `${res.status} ${e.code}${reason}`;
  }
  const location = res.headers.get('location');
  if (location) return `${res.status} → ${location}`;
  const text = res.text.trim();
  return text ? `${res.status} ${text.length > 80 ? `${text.slice(0, 80)}…` : text}` : String(res.status);
}
