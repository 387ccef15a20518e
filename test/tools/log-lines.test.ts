// A tool server's per-call lines: the request line and the `tool call` line hold flat fields only and are written
// without the redaction pass (lib/logger.ts flatLines); their shape (field order included) is what it was when a
// child logger wrote them. Every line a tool or an error writes still goes through the redaction, with the
// call's bindings.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger, flatLines, type Logger } from '../../lib/logger.ts';
import { createToolHandler } from '../../tools/kit/app.ts';
import { createHostGuard } from '../../tools/kit/host-guard.ts';
import { createMcpEndpoint, type McpEndpoint } from '../../tools/kit/mcp.ts';
import { defineTool } from '../../tools/kit/tool.ts';
import { whoami } from '../../tools/platform/tools/whoami.ts';
import { crashTool, identityFor, signedHeaders, toolKey } from './helpers.ts';

const SERVICE = 'platform';
const REVISION = '2026-07-28';
const SECRET = 'secret-tool-token-value';

const chatty = defineTool({
  name: 'chatty',
  title: 'Chatty',
  description: 'Logs a line with a token in it, then answers.',
  input: z.object({}),
  output: z.object({ ok: z.boolean() }),
  async run(_args, { log }) {
    log.info({ upstream: { token: SECRET } }, 'chatty said');
    return { ok: true };
  },
});

type Line = Record<string, unknown>;
let lines: Line[];
let server: Server;
let mcp: McpEndpoint;
let url: string;

beforeAll(async () => {
  lines = [];
  const log = createLogger({
    name: 'log-lines-test',
    destination: { write: (l: string) => void lines.push(JSON.parse(l)) },
  });
  mcp = createMcpEndpoint({ name: SERVICE, version: '1.0.0', tools: [whoami, chatty, crashTool], log });
  server = createServer(
    createToolHandler(
      {
        service: SERVICE,
        identityKey: toolKey(SERVICE),
        hostGuard: createHostGuard([], []),
        // The request's logger, asked for by a check that logs (as the users-table check does when the database
        // is down): its line must carry the request's id.
        provisioning: async (identity, log) => {
          if (identity.email.endsWith('@down.example')) log().warn({ db: { password: SECRET } }, 'db down');
          return 'verified';
        },
        mcp,
      },
      log,
    ),
  );
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${SERVICE}/mcp`;
});

afterAll(async () => {
  server?.close();
  await mcp?.close();
});

async function callTool(name: string, email = 'ada@example.com'): Promise<string> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name,
      arguments: {},
      _meta: {
        'io.modelcontextprotocol/protocolVersion': REVISION,
        'io.modelcontextprotocol/clientInfo': { name: 'log-lines-test', version: '1.0.0' },
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });
  const identity = identityFor({ email, sub: `sub-${name}` });
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': REVISION,
      'mcp-method': 'tools/call',
      'mcp-name': name,
      ...signedHeaders(identity, { url, method: 'POST', body }),
    },
    body,
  });
  expect(res.status).toBe(200);
  await res.text();
  const reqId = res.headers.get('x-request-id');
  await expect.poll(() => lines.some((l) => l.msg === 'request' && l.reqId === reqId)).toBe(true);
  return reqId!;
}

const of = (reqId: string) => lines.filter((l) => l.reqId === reqId);

describe("a tool server's lines", () => {
  it('a plain call writes the request line and the tool call line, in the shape a child logger wrote them', async () => {
    const reqId = await callTool('whoami');
    const mine = of(reqId);
    expect(mine.map((l) => l.msg)).toEqual(['tool call', 'request']);
    const [call, request] = mine as [Line, Line];
    expect(Object.keys(call)).toEqual([
      'level',
      'time',
      'pid',
      'name',
      'reqId',
      'tool',
      'caller',
      'ms',
      'ok',
      'msg',
    ]);
    expect(call).toMatchObject({
      level: 30,
      name: 'log-lines-test',
      tool: 'whoami',
      caller: 'ada@example.com',
      ok: true,
    });
    expect(Object.keys(request)).toEqual([
      'level',
      'time',
      'pid',
      'name',
      'reqId',
      'method',
      'path',
      'status',
      'ms',
      'mcp',
      'msg',
    ]);
    expect(request).toMatchObject({ method: 'POST', path: `/${SERVICE}/mcp`, status: 200, mcp: 'fast' });
  });

  it("a tool's own line carries the call's bindings and is redacted", async () => {
    const reqId = await callTool('chatty');
    const said = of(reqId).find((l) => l.msg === 'chatty said');
    expect(said).toMatchObject({
      tool: 'chatty',
      caller: 'ada@example.com',
      upstream: { token: '[redacted]' },
    });
    expect(of(reqId).find((l) => l.msg === 'tool call')).toMatchObject({ tool: 'chatty', ok: true });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it("a failing tool's error line carries the call's bindings; the call line says it failed", async () => {
    const reqId = await callTool('crash');
    const failed = of(reqId).find((l) => l.msg === 'tool failed');
    expect(failed).toMatchObject({ level: 50, tool: 'crash', caller: 'ada@example.com' });
    expect(of(reqId).find((l) => l.msg === 'tool call')).toMatchObject({ tool: 'crash', ok: false });
  });

  it("a check that logs gets the request's logger: its line carries reqId and is redacted", async () => {
    const reqId = await callTool('whoami', 'bo@down.example');
    expect(of(reqId).find((l) => l.msg === 'db down')).toMatchObject({
      level: 40,
      db: { password: '[redacted]' },
    });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });
});

// What keeps secrets out of the unredacted lines is the type: flat fields only. (Compiled by `make typecheck`,
// never run.)
export function onlyFlatFields(log: Logger): void {
  // @ts-expect-error a nested object (where a token would sit) is not a flat field
  flatLines(log).info({ body: { token: 'x' } }, 'refused at compile time');
  flatLines(log).info({ reqId: 'r', status: 200, ok: true }, 'fine');
}
