// tools/list narrowing on the wire: a running gateway with a policy in front of a stand-in tool server that
// answers tools/list as JSON or as a server-sent event stream (both are streamable HTTP). The SSE answer must
// stay a stream (an event reaches the client before the next is written); other answers pass untouched.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type GatewayProcess,
  gatewayEnv,
  type KeyServer,
  platformToken,
  startGatewayProcess,
  startKeyServer,
} from './helpers.ts';

const TOOLS = [
  { name: 'open_tool', inputSchema: { type: 'object' } },
  { name: 'hidden_tool', inputSchema: { type: 'object' } },
];
const dir = mkdtempSync(join(tmpdir(), 'policy-narrowing-'));

let ks: KeyServer;
let gw: GatewayProcess;
let upstream: Server;
let token: string;
/** Releases the SSE answer's second event (the test decides when). */
let release: () => void = () => {};

function answer(req: IncomingMessage, res: ServerResponse, body: string): void {
  const msg = JSON.parse(body) as { id: number; method: string };
  const result = {
    jsonrpc: '2.0',
    id: msg.id,
    result: msg.method === 'tools/list' ? { tools: TOOLS } : { ok: 1 },
  };
  if (req.url?.includes('json')) {
    const text = JSON.stringify(result);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(
    `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })}\n\n`,
  );
  release = () => res.end(`event: message\nid: 9\ndata: ${JSON.stringify(result)}\n\n`);
}

beforeAll(async () => {
  ks = await startKeyServer();
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => answer(req, res, Buffer.concat(chunks).toString()));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, 'rules:\n  - {tool: hidden_tool, effect: deny}\n  - {effect: allow}\n');
  gw = await startGatewayProcess(
    gatewayEnv(
      {
        services: { svc: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` },
        platform: ks,
        redisUrl: inject('redisUrl'),
      },
      { GATEWAY_POLICY_FILE: file },
    ),
  );
  token = await platformToken(ks, { email: 'n@example.com', scope: 'mcp:svc' });
});

afterAll(async () => {
  await gw?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await ks?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** POSTs a JSON-RPC request; calls `onData` with the text received so far, resolves with all of it. */
function post(path: string, method: string, onData?: (soFar: string) => void) {
  return new Promise<{ status: number; headers: IncomingMessage['headers']; text: string }>(
    (resolve, reject) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 3, method });
      const req = request(`${gw.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
        agent: false,
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          onData?.(text);
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      });
      req.on('error', reject);
      req.end(body);
    },
  );
}

const toolNames = (json: string) =>
  (JSON.parse(json) as { result: { tools: Array<{ name: string }> } }).result.tools.map((t) => t.name);

describe('tools/list narrowing on the wire', () => {
  it('rewrites a JSON answer (and its Content-Length)', async () => {
    const r = await post('/svc/mcp/json', 'tools/list');
    expect(r.status).toBe(200);
    expect(toolNames(r.text)).toEqual(['open_tool']);
    expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(r.text));
  });

  it('rewrites an SSE answer event by event, still streaming', async () => {
    let firstSeenBeforeRelease = false;
    const done = post('/svc/mcp/sse', 'tools/list', (soFar) => {
      if (soFar.includes('notifications/progress') && !soFar.includes('"result"')) {
        firstSeenBeforeRelease = true;
        release();
      }
    });
    const r = await done;
    expect(firstSeenBeforeRelease).toBe(true);
    expect(r.headers['content-type']).toBe('text/event-stream');
    const events = r.text.split('\n\n').filter((e) => e !== '');
    expect(events).toHaveLength(2);
    const last = events[1]!.split('\n');
    expect(last.slice(0, 2)).toEqual(['event: message', 'id: 9']);
    expect(toolNames(last[2]!.slice('data: '.length))).toEqual(['open_tool']);
  });

  it('leaves every other answer as the tool server sent it', async () => {
    const r = await post('/svc/mcp/json', 'ping');
    expect(JSON.parse(r.text)).toEqual({ jsonrpc: '2.0', id: 3, result: { ok: 1 } });
    const denied = await new Promise<number>((resolve) => {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'hidden_tool' },
      });
      const req = request(`${gw.url}/svc/mcp/json`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        agent: false,
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.end(body);
    });
    expect(denied).toBe(403);
  });

  it('decides a 2026-07-28 request on its headers only once they agree with the body', async () => {
    const send = (headerTool: string, bodyTool: string) =>
      new Promise<number>((resolve) => {
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 6,
          method: 'tools/call',
          params: { name: bodyTool },
        });
        const req = request(`${gw.url}/svc/mcp/json`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'mcp-method': 'tools/call',
            'mcp-name': headerTool,
          },
          agent: false,
        });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.end(body);
      });
    expect(await send('hidden_tool', 'hidden_tool')).toBe(403);
    // A header naming an allowed tool over a body naming the denied one never reaches the rules.
    expect(await send('open_tool', 'hidden_tool')).toBe(400);
    expect(await send('open_tool', 'open_tool')).toBe(200);
  });

  it('refuses a compressed request body it cannot check (400 encoded_body)', async () => {
    const { gzipSync } = await import('node:zlib');
    const body = gzipSync(
      JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'hidden_tool' } }),
    );
    const r = await new Promise<{ status: number; text: string }>((resolve) => {
      const req = request(`${gw.url}/svc/mcp/json`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'content-length': body.length,
        },
        agent: false,
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.end(body);
    });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.context.reason).toBe('encoded_body');
  });
});
