// mcp_server_operation_duration_seconds on a real gateway's METRICS_PORT, in front of an upstream of the test's
// own that lists one tool: the tool label names only tools the upstream's tools/list answers named (anything else,
// including a tool called before any listing, is `other`), the method label only MCP's methods, and the outcome
// follows the answer (a tool the policy denies: refused).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../helpers/processes.ts';
import {
  call,
  forgetSharedKeySets,
  type GatewayProcess,
  gatewayEnv,
  type KeyServer,
  platformToken,
  startGatewayProcess,
  startKeyServer,
} from './helpers.ts';

let ks: KeyServer;
let upstream: Server;
let gateway: GatewayProcess;
let metricsPort: number;
let token: string;
const dir = mkdtempSync(join(tmpdir(), 'gateway-op-metrics-'));

beforeAll(async () => {
  ks = await startKeyServer();
  await forgetSharedKeySets(inject('redisUrl'), ks.issuer);
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const msg = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as {
        id?: number;
        method?: string;
      };
      const result = msg.method === 'tools/list' ? { tools: [{ name: 'known_tool', inputSchema: {} }] } : {};
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id ?? null, result }));
    });
  });
  upstream.listen(0, '127.0.0.1');
  await new Promise((r) => upstream.once('listening', r));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'rules:\n  - tool: forbidden_tool\n    effect: deny\n  - effect: allow\n');
  metricsPort = await freePort();
  gateway = await startGatewayProcess(
    gatewayEnv(
      {
        services: { mail: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` },
        platform: ks,
        redisUrl: inject('redisUrl'),
      },
      { METRICS_PORT: String(metricsPort), GATEWAY_POLICY_FILE: policy },
    ),
  );
  token = await platformToken(ks, { email: 'metrics@example.com' });
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  upstream?.close();
  await ks?.close();
  rmSync(dir, { recursive: true, force: true });
});

const rpc = (method: string, tool?: string) =>
  call(`${gateway.url}/mail/mcp`, {
    method: 'POST',
    token,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: tool ? { name: tool, arguments: {} } : {},
    }),
  });

/** The histogram's _count series, as label sets with their counts. */
async function counts(): Promise<Array<{ labels: Record<string, string>; count: number }>> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const out: Array<{ labels: Record<string, string>; count: number }> = [];
  for (const line of text.split('\n')) {
    const m = /^mcp_server_operation_duration_seconds_count\{(.*)\} (\d+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of m[1]!.matchAll(/(\w+)="([^"]*)"/g)) labels[k!] = v!;
    out.push({ labels, count: Number(m[2]) });
  }
  return out;
}

function countOf(all: Awaited<ReturnType<typeof counts>>, labels: Record<string, string>): number {
  return all
    .filter((c) => Object.entries(labels).every(([k, v]) => c.labels[k] === v))
    .reduce((n, c) => n + c.count, 0);
}

describe('mcp_server_operation_duration_seconds', () => {
  it('labels tools only as the upstream lists them, methods only as MCP names them, and the outcome', async () => {
    // Before any listing the gateway knows no tool of this upstream.
    expect((await rpc('tools/call', 'known_tool')).status).toBe(200);
    let all = await counts();
    expect(countOf(all, { service: 'mail', method: 'tools/call', tool: 'other', outcome: 'ok' })).toBe(1);
    expect(all.some((c) => c.labels.tool === 'known_tool')).toBe(false);

    const list = await rpc('tools/list');
    expect(list.status).toBe(200);
    expect(list.json.result.tools).toEqual([{ name: 'known_tool', inputSchema: {} }]);
    expect((await rpc('tools/call', 'known_tool')).status).toBe(200);
    expect((await rpc('tools/call', 'made_up_tool')).status).toBe(200);
    expect((await rpc('vendor/custom')).status).toBe(200);
    expect((await rpc('tools/call', 'forbidden_tool')).status).toBe(403);
    all = await counts();
    expect(countOf(all, { service: 'mail', method: 'tools/list', tool: '', outcome: 'ok' })).toBe(1);
    expect(countOf(all, { method: 'tools/call', tool: 'known_tool', outcome: 'ok' })).toBe(1);
    expect(countOf(all, { method: 'tools/call', tool: 'other', outcome: 'ok' })).toBe(2);
    expect(countOf(all, { method: 'other', outcome: 'ok' })).toBe(1);
    expect(countOf(all, { method: 'tools/call', tool: 'other', outcome: 'refused' })).toBe(1);
    // No label value the client made up.
    const values = all.flatMap((c) => Object.values(c.labels));
    for (const made of ['made_up_tool', 'vendor/custom', 'forbidden_tool'])
      expect(values).not.toContain(made);
  });
});
