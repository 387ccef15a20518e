// A bounded load from the host through the proxy's loopback port: stateless MCP 2026-07-28 `tools/call`
// requests (no handshake, so any gateway and any tool-server replica can answer each one) at a fixed rate,
// every answer recorded with its start and end time, so a fault's instant splits them into before, in flight
// and after.
import { randomUUID } from 'node:crypto';
import { Agent, fetch } from 'undici';

const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'container-suite-load', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

export interface CallOutcome {
  /** ms (performance.now) when the request was sent and when its answer (or failure) arrived. */
  start: number;
  end: number;
  /** HTTP status; 0 when no HTTP answer arrived (connection refused, reset, timeout). */
  status: number;
  /** The tool ran and answered without a tool error. */
  ok: boolean;
  detail: string;
  key: string;
  structured?: Record<string, unknown>;
}

const agent = new Agent({ keepAliveTimeout: 4000, connections: 64 });

/** One stateless `tools/call`; never throws (a failure is an outcome). */
export async function callTool(o: {
  baseUrl: string;
  service: string;
  token: string;
  tool: string;
  args: Record<string, unknown>;
  key?: string;
  timeoutMs?: number;
}): Promise<CallOutcome> {
  const start = performance.now();
  const key = o.key ?? '';
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: o.tool, arguments: o.args, _meta: META },
  });
  try {
    const res = await fetch(`${o.baseUrl}/${o.service}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${o.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': PROTOCOL,
        'mcp-method': 'tools/call',
        'mcp-name': o.tool,
      },
      body,
      signal: AbortSignal.timeout(o.timeoutMs ?? 15_000),
      dispatcher: agent,
    });
    const text = await res.text();
    const end = performance.now();
    let result:
      | { isError?: boolean; structuredContent?: Record<string, unknown>; content?: unknown }
      | undefined;
    try {
      result = (JSON.parse(text) as { result?: typeof result }).result;
    } catch {
      result = undefined;
    }
    const ok = res.status === 200 && result !== undefined && result.isError !== true;
    return {
      start,
      end,
      status: res.status,
      ok,
      detail: ok ? '' : text.slice(0, 300),
      key,
      structured: result?.structuredContent,
    };
  } catch (err) {
    const e = err as { name?: string; message?: string; cause?: { code?: string } };
    return {
      start,
      end: performance.now(),
      status: 0,
      ok: false,
      detail: `${e.name}: ${e.cause?.code ?? e.message}`,
      key,
    };
  }
}

/** The arguments of one deal-closure proposal under a fresh idempotency key. */
export function proposal(dealId: string, key: string = randomUUID()): Record<string, unknown> {
  return {
    deal_id: dealId,
    idempotency_key: key,
    metrics: [{ name: 'revenue', value: 1250000, source_file: 'q3.xlsx', location: 'B7' }],
    citations: [{ anchor_type: 'content_hash', anchor: `sha256:${key}`, metric: 'revenue', value: 1250000 }],
  };
}

export interface LoadRun {
  outcomes: CallOutcome[];
  /** performance.now() of the run's start. */
  t0: number;
}

/**
 * Fires `rate` calls per second for `seconds` without waiting for answers (a fixed schedule, like traffic, not
 * a closed loop that slows down when the server does), then waits for every answer. `during` runs alongside
 * (the fault), given the run's start time.
 */
export async function runLoad(o: {
  rate: number;
  seconds: number;
  call: (i: number) => Promise<CallOutcome>;
  during?: (t0: number) => Promise<void>;
}): Promise<LoadRun> {
  const t0 = performance.now();
  const pending: Array<Promise<CallOutcome>> = [];
  const total = Math.round(o.rate * o.seconds);
  const fault = o.during?.(t0);
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / o.rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(o.call(i));
  }
  const outcomes = await Promise.all(pending);
  await fault;
  return { outcomes, t0 };
}

/** Outcomes split around an instant (ms, performance.now): answered before it, in flight at it, sent after it. */
export function around(outcomes: readonly CallOutcome[], instant: number) {
  return {
    before: outcomes.filter((c) => c.end < instant),
    inFlight: outcomes.filter((c) => c.start <= instant && c.end >= instant),
    after: outcomes.filter((c) => c.start > instant),
  };
}

export function summary(outcomes: readonly CallOutcome[]): string {
  const by = new Map<string, number>();
  for (const c of outcomes) {
    const k = c.ok
      ? 'ok'
      : c.status === 0
        ? 'no answer'
        : `${c.status}${c.status === 200 ? ' tool error' : ''}`;
    by.set(k, (by.get(k) ?? 0) + 1);
  }
  return [...by.entries()].map(([k, n]) => `${k}: ${n}`).join(', ');
}
