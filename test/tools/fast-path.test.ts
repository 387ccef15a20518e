// The kit's MCP fast path (tools/kit/fast-path.ts) against the SDK it stands in for: two copies of the same tool
// server kit over real HTTP, one with the fast path and one where the SDK answers everything (`fastPath: false`),
// get the same requests; their responses must be the same bytes (status line, headers, body; only Date and
// x-request-id differ). Each request's log line says who answered, so a case the fast path should answer fails
// if it silently went to the SDK, and a case it must leave alone fails if the fast path took it.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../lib/logger.ts';
import { createToolHandler } from '../../tools/kit/app.ts';
import { createHostGuard } from '../../tools/kit/host-guard.ts';
import { createMcpEndpoint, type McpEndpoint } from '../../tools/kit/mcp.ts';
import { defineTool } from '../../tools/kit/tool.ts';
import { ToolError } from '../../tools/kit/tool-errors.ts';
import { whoami } from '../../tools/platform/tools/whoami.ts';
import { crashTool, identityFor, signedHeaders, toolKey } from './helpers.ts';

const SERVICE = 'platform';
const PATH = `/${SERVICE}/mcp`;
const REVISION = '2026-07-28';

const echo = defineTool({
  name: 'echo',
  title: 'Echo',
  description: 'Echoes its arguments, with the default filled in.',
  input: z.object({
    text: z.string().min(1),
    times: z.number().int().default(1),
    tags: z.array(z.string()).optional(),
  }),
  output: z.object({ text: z.string(), times: z.number(), tags: z.array(z.string()).optional() }),
  annotations: { readOnlyHint: true },
  async run(args) {
    return args;
  },
});
const refuse = defineTool({
  name: 'refuse',
  title: 'Refuse',
  description: 'Always refuses (a tool error).',
  input: z.object({}),
  output: z.object({ ok: z.boolean() }),
  async run() {
    throw new ToolError('forbidden_thing', 'this is refused', 403);
  },
});
const badOutput = defineTool({
  name: 'bad_output',
  title: 'Bad output',
  description: 'Returns what its own output schema refuses.',
  input: z.object({}),
  output: z.object({ count: z.number(), label: z.string() }),
  async run() {
    return { count: 'many' } as unknown as { count: number; label: string };
  },
});
// Declares an `Mcp-Param-Region` header (SEP-2243) the SDK checks against the argument: left to the SDK.
const regional = defineTool({
  name: 'regional',
  title: 'Regional',
  description: 'Takes a region mirrored in a header.',
  input: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }),
  output: z.object({ region: z.string() }),
  async run(args) {
    return args;
  },
});
// An asynchronous refinement: only the SDK's awaited validation can check it.
const slowCheck = defineTool({
  name: 'slow_check',
  title: 'Slow check',
  description: 'Arguments checked asynchronously.',
  input: z.object({ code: z.string().refine(async (v) => v !== 'no', 'refused code') }),
  output: z.object({ code: z.string() }),
  async run(args) {
    return args;
  },
});
// Reads its abort signal before or after the client goes away, and records whether it saw the abort.
const sawAbort = new Map<string, boolean>();
const patient = defineTool({
  name: 'patient',
  title: 'Patient',
  description: 'Waits, and tells whether its call was aborted.',
  input: z.object({ key: z.string(), read: z.enum(['before', 'after']) }),
  output: z.object({ aborted: z.boolean() }),
  async run({ key, read }, call) {
    if (read === 'before') {
      const signal = call.signal;
      await new Promise((r) => {
        signal.addEventListener('abort', r);
        setTimeout(r, 2000);
      });
      sawAbort.set(key, signal.aborted);
    } else {
      await new Promise((r) => setTimeout(r, 400));
      sawAbort.set(key, call.signal.aborted);
    }
    return { aborted: sawAbort.get(key)! };
  },
});
const TOOLS = [whoami, echo, refuse, crashTool, badOutput, regional, slowCheck, patient];

interface Kit {
  port: number;
  server: Server;
  mcp: McpEndpoint;
  /** Who answered each request, by its x-request-id: 'fast', 'sdk', or undefined (refused before MCP). */
  answeredBy(requestId: string): string | undefined;
}

async function startKit(fastPath: boolean): Promise<Kit> {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  const log = createLogger({ name: 'fast-path-test', level: 'info', destination });
  const mcp = createMcpEndpoint({ name: SERVICE, version: '1.0.0', tools: TOOLS, log, fastPath });
  const handler = createToolHandler(
    {
      service: SERVICE,
      identityKey: toolKey(SERVICE),
      hostGuard: createHostGuard([], []),
      // A caller at down.example answers as if the users table could not be asked.
      provisioning: async (identity) =>
        identity.email.endsWith('@down.example') ? 'unverified' : 'verified',
      mcp,
    },
    log,
  );
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    server,
    mcp,
    answeredBy: (requestId) => {
      const line = lines.find((l) => l.msg === 'request' && l.reqId === requestId);
      if (!line) throw new Error(`no request log line for ${requestId}`);
      return line.mcp as string | undefined;
    },
  };
}

let fast: Kit;
let sdk: Kit;

beforeAll(async () => {
  [fast, sdk] = await Promise.all([startKit(true), startKit(false)]);
});

afterAll(async () => {
  for (const k of [fast, sdk]) {
    k?.server.close();
    await k?.mcp.close();
  }
});

const user = { email: 'ada@example.com', sub: 'user-ada' };

interface Exchange {
  /** The raw response, Date and x-request-id values blanked. */
  raw: string;
  requestId: string;
  status: number;
  body: string;
}

/** One POST over a fresh socket, raw bytes both ways; identity headers signed for that very request. */
async function exchange(
  kit: Kit,
  body: string,
  headers: Record<string, string>,
  opts: { identity?: boolean; email?: string } = {},
): Promise<Exchange> {
  const identity =
    opts.identity === false
      ? {}
      : signedHeaders(identityFor({ ...user, email: opts.email ?? user.email }), {
          url: `http://127.0.0.1:${kit.port}${PATH}`,
          method: 'POST',
          body,
        });
  let head = `POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`;
  for (const [k, v] of Object.entries({ ...headers, ...identity })) head += `${k}: ${v}\r\n`;
  head += `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(kit.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.end(head + body);
  });
  const requestId = /\r\nx-request-id: ([^\r]+)\r\n/i.exec(raw)?.[1] ?? '';
  const [statusLine, ...rest] = raw.split('\r\n\r\n')[0]!.split('\r\n');
  void rest;
  return {
    raw: raw
      .replace(/\r\nDate: [^\r]+/, '\r\nDate: -')
      .replace(/\r\nx-request-id: [^\r]+/i, '\r\nx-request-id: -'),
    requestId,
    status: Number(statusLine!.split(' ')[1]),
    body: raw.slice(raw.indexOf('\r\n\r\n') + 4),
  };
}

const envelope = (over: Record<string, unknown> = {}) => ({
  'io.modelcontextprotocol/protocolVersion': REVISION,
  'io.modelcontextprotocol/clientInfo': { name: 'fast-path-test', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
  ...over,
});

const mcpHeaders = (method: string, name?: string): Record<string, string> => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': REVISION,
  'mcp-method': method,
  ...(name !== undefined && { 'mcp-name': name }),
});

const call = (name: string, args?: unknown, id: string | number = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, ...(args !== undefined && { arguments: args }), _meta: envelope() },
});

interface Case {
  name: string;
  body: unknown;
  headers: Record<string, string>;
  /** Who must answer on the fast server. */
  by: 'fast' | 'sdk' | 'kit';
  status: number;
  identity?: boolean;
  email?: string;
}

const CASES: Case[] = [
  {
    name: 'tools/list',
    body: { jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _meta: envelope() } },
    headers: mcpHeaders('tools/list'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tools/list, string id',
    body: { jsonrpc: '2.0', id: 'list-"1"', method: 'tools/list', params: { _meta: envelope() } },
    headers: mcpHeaders('tools/list'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tools/call whoami',
    body: call('whoami', {}),
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tools/call without arguments',
    body: call('whoami', undefined, 'no-args'),
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tools/call ok, a default filled in',
    body: call('echo', { text: 'héllo "quoted" \u2028', tags: ['a', 'b'] }, 42),
    headers: mcpHeaders('tools/call', 'echo'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tools/call ok, extra argument stripped',
    body: call('echo', { text: 'x', times: 3, extra: true }),
    headers: mcpHeaders('tools/call', 'echo'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tool error',
    body: call('refuse', {}),
    headers: mcpHeaders('tools/call', 'refuse'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'tool crash',
    body: call('crash', {}),
    headers: mcpHeaders('tools/call', 'crash'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'output refused by its own schema',
    body: call('bad_output', {}),
    headers: mcpHeaders('tools/call', 'bad_output'),
    by: 'fast',
    status: 200,
  },
  {
    name: 'users table unavailable (tool degraded)',
    body: call('whoami', {}),
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'fast',
    status: 200,
    email: 'bob@down.example',
  },
  {
    name: 'unknown tool',
    body: call('nope', {}),
    headers: mcpHeaders('tools/call', 'nope'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'invalid arguments',
    body: call('echo', { text: '', times: 1.5 }),
    headers: mcpHeaders('tools/call', 'echo'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'arguments not an object',
    body: call('echo', ['x']),
    headers: mcpHeaders('tools/call', 'echo'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'a tool declaring an Mcp-Param header, the header missing',
    body: call('regional', { region: 'eu' }),
    headers: mcpHeaders('tools/call', 'regional'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'a tool declaring an Mcp-Param header, the header given',
    body: call('regional', { region: 'eu' }),
    headers: { ...mcpHeaders('tools/call', 'regional'), 'mcp-param-region': 'eu' },
    by: 'sdk',
    status: 200,
  },
  {
    name: 'arguments checked asynchronously',
    body: call('slow_check', { code: 'yes' }),
    headers: mcpHeaders('tools/call', 'slow_check'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'not JSON content',
    body: call('whoami', {}),
    headers: { ...mcpHeaders('tools/call', 'whoami'), 'content-type': 'text/plain' },
    by: 'sdk',
    status: 415,
  },
  {
    name: 'a member beside the JSON-RPC ones',
    body: { ...call('whoami', {}), extra: true },
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'a task parameter',
    body: {
      ...call('whoami', {}),
      params: { name: 'whoami', arguments: {}, task: { ttl: 1000 }, _meta: envelope() },
    },
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'wrong protocol version header',
    body: call('whoami', {}),
    headers: { ...mcpHeaders('tools/call', 'whoami'), 'mcp-protocol-version': '2025-11-25' },
    by: 'sdk',
    status: 400,
  },
  {
    name: 'unsupported revision in the envelope',
    body: {
      ...call('whoami', {}),
      params: {
        name: 'whoami',
        arguments: {},
        _meta: envelope({ 'io.modelcontextprotocol/protocolVersion': '2027-01-01' }),
      },
    },
    headers: { ...mcpHeaders('tools/call', 'whoami'), 'mcp-protocol-version': '2027-01-01' },
    by: 'sdk',
    status: 400,
  },
  {
    name: 'missing protocol version header',
    body: call('whoami', {}),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      'mcp-method': 'tools/call',
      'mcp-name': 'whoami',
    },
    by: 'sdk',
    status: 400,
  },
  {
    name: 'Mcp-Name disagrees with the body',
    body: call('whoami', {}),
    headers: mcpHeaders('tools/call', 'echo'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'Mcp-Method disagrees with the body',
    body: call('whoami', {}),
    headers: mcpHeaders('tools/list'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'malformed envelope',
    body: {
      ...call('whoami', {}),
      params: { name: 'whoami', arguments: {}, _meta: envelope({ 'io.modelcontextprotocol/clientInfo': 5 }) },
    },
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'a progress token in _meta',
    body: {
      ...call('whoami', {}),
      params: { name: 'whoami', arguments: {}, _meta: envelope({ progressToken: 'p1' }) },
    },
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'tools/list with a cursor',
    body: { jsonrpc: '2.0', id: 8, method: 'tools/list', params: { cursor: 'x', _meta: envelope() } },
    headers: mcpHeaders('tools/list'),
    by: 'sdk',
    status: 200,
  },
  {
    name: 'a fractional id',
    body: call('whoami', {}, 1.5),
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 400,
  },
  {
    name: 'an event-stream-only Accept',
    body: call('whoami', {}),
    headers: { ...mcpHeaders('tools/call', 'whoami'), accept: 'text/event-stream' },
    by: 'sdk',
    status: 200,
  },
  {
    name: 'a notification',
    body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: envelope() } },
    headers: mcpHeaders('notifications/cancelled'),
    by: 'sdk',
    status: 202,
  },
  {
    name: 'a batch',
    body: [call('whoami', {})],
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'sdk',
    status: 400,
  },
  {
    name: '2025-11-25 initialize',
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    },
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    by: 'sdk',
    status: 200,
  },
  {
    name: 'missing identity',
    body: call('whoami', {}),
    headers: mcpHeaders('tools/call', 'whoami'),
    by: 'kit',
    status: 401,
    identity: false,
  },
];

/** Blanks what legitimately differs per response: request ids inside 401 bodies and the signed identity echo. */
function normalize(e: Exchange): string {
  return e.raw.replaceAll(e.requestId, '-');
}

describe('MCP fast path answers exactly as the SDK', () => {
  for (const c of CASES) {
    it(`${c.name}: ${c.by === 'fast' ? 'answered by the fast path' : c.by === 'sdk' ? 'left to the SDK' : 'refused by the kit'}, same bytes`, async () => {
      const body = JSON.stringify(c.body);
      const opts = { identity: c.identity, email: c.email };
      const [viaFast, viaSdk] = await Promise.all([
        exchange(fast, body, c.headers, opts),
        exchange(sdk, body, c.headers, opts),
      ]);
      expect(viaSdk.status).toBe(c.status);
      expect(normalize(viaFast)).toBe(normalize(viaSdk));
      await new Promise((r) => setImmediate(r)); // the request line is logged on close
      expect(fast.answeredBy(viaFast.requestId)).toBe(c.by === 'kit' ? undefined : c.by);
      expect(sdk.answeredBy(viaSdk.requestId)).toBe(c.by === 'kit' ? undefined : 'sdk');
    });
  }

  it('answers a tool call with the caller it was signed for', async () => {
    const body = JSON.stringify(call('whoami', {}));
    const r = await exchange(fast, body, mcpHeaders('tools/call', 'whoami'));
    const parsed = JSON.parse(r.body.replace(/^[0-9a-f]+\r\n/, '').replace(/\r\n0\r\n\r\n$/, '')) as {
      result: { structuredContent: Record<string, unknown> };
    };
    expect(parsed.result.structuredContent).toMatchObject({ email: user.email, sub: user.sub });
  });

  it('runs each call once, even for concurrent requests with different ids', async () => {
    const ids = Array.from({ length: 20 }, () => randomUUID());
    const results = await Promise.all(
      ids.map((id) =>
        exchange(fast, JSON.stringify(call('echo', { text: id }, id)), mcpHeaders('tools/call', 'echo')),
      ),
    );
    for (const [i, r] of results.entries()) {
      expect(r.body).toContain(`"id":"${ids[i]}"`);
      expect(r.body).toContain(`\\"text\\":\\"${ids[i]}\\"`);
    }
  });

  // The signal is made only when a tool reads it (fast-path.ts): it must abort all the same.
  for (const read of ['before', 'after'] as const) {
    it(`aborts a call's signal when the client goes away (signal read ${read} that)`, async () => {
      const key = randomUUID();
      const body = JSON.stringify(call('patient', { key, read }));
      const identity = signedHeaders(identityFor(user), {
        url: `http://127.0.0.1:${fast.port}${PATH}`,
        method: 'POST',
        body,
      });
      let head = `POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
      for (const [k, v] of Object.entries({ ...mcpHeaders('tools/call', 'patient'), ...identity }))
        head += `${k}: ${v}\r\n`;
      head += `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      const socket = net.connect(fast.port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(head + body);
      await new Promise((r) => setTimeout(r, 150));
      socket.destroy();
      await expect.poll(() => sawAbort.get(key), { timeout: 3000 }).toBe(true);
    });
  }
});
