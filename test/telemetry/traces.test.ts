// One trace from client to tool: `platform idp`, `platform gateway` and `platform tool platform` as real
// processes whose own OpenTelemetry OTLP/HTTP exporters (http/json) send to a receiver this test runs. A tools/call
// with a W3C traceparent header, and one with `params._meta.traceparent` instead, yield the gateway's and the tool
// server's spans in the client's trace, each the child of the one before, named and attributed by the MCP
// conventions; a refused bearer's span carries error.type; the IdP's token span its grant type; a gateway with
// sampling off exports nothing and one without an endpoint makes no span at all. No secret of the test's reaches
// any exported byte.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { call, errorOf, type GatewayResponse } from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { exchangeCode, obtainCode, refresh } from '../helpers/oauth.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import {
  freePort,
  type GatewayProcess,
  type IdpProcess,
  type RunningProcess,
  startGatewayProcess,
  startIdpProcess,
  startPlatform,
} from '../helpers/processes.ts';
import { IDENTITY_SECRET, toolKey } from '../tools/helpers.ts';

let receiver: OtlpReceiver;
let db: TestDatabase;
let idp: IdpProcess;
let tool: RunningProcess;
let gateway: GatewayProcess;
const others: GatewayProcess[] = [];
let user: SeededUser;
let gatewayEnv: Record<string, string>;
const secrets: string[] = [];
let accessToken: string;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const BASE = 'https://mcp.traces.test';

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  db = await createTestDatabase();
  user = await seedUser(db.pool);
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  };
  const toolPort = await freePort();
  tool = startPlatform(['tool', 'platform'], {
    DATABASE_URL: db.url,
    TOOL_IDENTITY_KEY: toolKey('platform'),
    PLATFORM_MCP_PORT: String(toolPort),
    ...otel,
  });
  [idp] = await Promise.all([
    startIdpProcess({
      databaseUrl: db.url,
      redisUrl: inject('redisUrl'),
      env: { PUBLIC_BASE_URL: BASE, PLATFORM_SERVICES: 'platform', ...otel },
    }),
    tool.waitFor(/platform tool server listening/, 60_000),
  ]);
  gatewayEnv = {
    PUBLIC_BASE_URL: BASE,
    GATEWAY_SERVICES: 'platform',
    PLATFORM_MCP_UPSTREAM: `http://127.0.0.1:${toolPort}`,
    PLATFORM_ISSUER: idp.issuer,
    PLATFORM_AUDIENCE: idp.audience,
    REDIS_URL: inject('redisUrl'),
    GATEWAY_IDENTITY_SECRET: IDENTITY_SECRET,
    PLATFORM_MCP_ALLOWED_HOSTS: '127.0.0.1:*,mcp.traces.test',
  };
  gateway = await startGatewayProcess({
    ...gatewayEnv,
    ...otel,
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=traces-test',
  });
  // The sign-in, its code and tokens: every one of them is searched for in what was exported.
  const c = await obtainCode({
    issuer: idp.issuer,
    sessionToken: user.sessionToken,
    params: { scope: 'openid email mcp:platform' },
  });
  const t = await exchangeCode(idp.issuer, c);
  expect(t.status).toBe(200);
  accessToken = t.json.access_token as string;
  const r = await refresh(idp.issuer, t.json.refresh_token as string);
  expect(r.status).toBe(200);
  secrets.push(
    user.email,
    user.sessionToken,
    c.code,
    c.verifier,
    accessToken,
    t.json.refresh_token as string,
    t.json.id_token as string,
    r.json.access_token as string,
    r.json.refresh_token as string,
    IDENTITY_SECRET,
    toolKey('platform'),
  );
}, 180_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), tool?.stop(), idp?.stop(), ...others.map((g) => g.stop())]);
  await receiver?.close();
  await db?.drop();
});

function toolsCall(
  gw: { url: string },
  o: { id: number; token?: string; traceparent?: string; meta?: string },
): Promise<GatewayResponse> {
  return call(`${gw.url}/platform/mcp`, {
    method: 'POST',
    token: o.token ?? accessToken,
    headers: {
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(o.traceparent && { traceparent: o.traceparent }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: o.id,
      method: 'tools/call',
      params: { name: 'whoami', arguments: {}, ...(o.meta && { _meta: { traceparent: o.meta } }) },
    }),
  });
}

const inTrace = (traceId: string, service: string) => (s: ReceivedSpan) =>
  s.traceId === traceId && s.service === service;

/** The gateway's and the tool server's span of one trace, checked against the client's span. */
async function clientToTool(traceId: string, clientSpan: string, id: number): Promise<void> {
  const [gw] = await receiver.waitFor(inTrace(traceId, 'platform-gateway'));
  const [tl] = await receiver.waitFor(inTrace(traceId, 'platform-tool-platform'));
  expect(gw!.parentSpanId).toBe(clientSpan);
  expect(tl!.parentSpanId).toBe(gw!.spanId);
  expect(gw!.resource['deployment.environment.name']).toBe('traces-test');
  for (const span of [gw!, tl!]) {
    expect(span.name).toBe('tools/call whoami');
    expect(span.kind).toBe(2); // SERVER
    expect(span.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'whoami',
      'gen_ai.operation.name': 'execute_tool',
      'jsonrpc.request.id': String(id),
      'mcp.protocol.version': '2025-06-18',
      'http.response.status_code': 200,
    });
    expect(span.attributes['error.type']).toBeUndefined();
  }
}

describe('traces from client to tool', () => {
  it('continues an inbound traceparent header through the gateway to the tool server', async () => {
    const traceId = hex(16);
    const clientSpan = hex(8);
    const r = await toolsCall(gateway, { id: 7, traceparent: `00-${traceId}-${clientSpan}-01` });
    expect(r.status).toBe(200);
    await clientToTool(traceId, clientSpan, 7);
  });

  it('continues params._meta.traceparent when the request has no traceparent header', async () => {
    const traceId = hex(16);
    const clientSpan = hex(8);
    const r = await toolsCall(gateway, { id: 8, meta: `00-${traceId}-${clientSpan}-01` });
    expect(r.status).toBe(200);
    await clientToTool(traceId, clientSpan, 8);
  });

  it("marks a refused bearer's span with error.type, the error body's reason", async () => {
    const traceId = hex(16);
    const bad = `${accessToken.slice(0, -6)}AAAAAA`;
    secrets.push(bad);
    const r = await toolsCall(gateway, { id: 9, token: bad, traceparent: `00-${traceId}-${hex(8)}-01` });
    expect(r.status).toBe(401);
    const [span] = await receiver.waitFor(inTrace(traceId, 'platform-gateway'));
    expect(span!.attributes['error.type']).toBe(errorOf(r).reason);
    expect(span!.attributes['http.response.status_code']).toBe(401);
    expect(span!.status.code).toBe(2); // ERROR
    // Refused at the gateway: the tool server never saw it.
    expect(receiver.spans.filter(inTrace(traceId, 'platform-tool-platform'))).toEqual([]);
  });

  it("marks a refused token request's span with the OAuth error as error.type", async () => {
    const traceId = hex(16);
    const clientSpan = hex(8);
    const used = `used-${hex(16)}`;
    secrets.push(used);
    const r = await fetch(`${idp.issuer}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        traceparent: `00-${traceId}-${clientSpan}-01`,
      },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: used,
        code_verifier: hex(32),
        redirect_uri: 'http://127.0.0.1:53682/callback',
        client_id: 'platform-cli',
      }),
    });
    expect(r.status).toBe(400);
    const { error } = (await r.json()) as { error: string };
    const [span] = await receiver.waitFor(inTrace(traceId, 'platform-idp'));
    expect(span!.parentSpanId).toBe(clientSpan);
    expect(span!.name).toBe('POST /oauth/token');
    expect(span!.attributes).toMatchObject({
      'oauth.grant_type': 'authorization_code',
      'error.type': error,
      'http.response.status_code': 400,
    });
  });

  it("puts the grant type on the IdP's token spans", async () => {
    const spans = await receiver.waitFor(
      (s) =>
        s.service === 'platform-idp' &&
        s.name === 'POST /oauth/token' &&
        s.attributes['http.response.status_code'] === 200,
      2,
    );
    expect(spans.map((s) => s.attributes['oauth.grant_type']).sort()).toEqual([
      'authorization_code',
      'refresh_token',
    ]);
    for (const s of spans) {
      expect(s.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.route': '/oauth/token' });
      expect(s.attributes['http.response.status_code']).toBe(200);
    }
  });

  it('exports nothing with OTEL_TRACES_SAMPLER=always_off, and makes no span without an endpoint', async () => {
    const off = await startGatewayProcess({
      ...gatewayEnv,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_SERVICE_NAME: 'gateway-sampling-off',
      OTEL_TRACES_SAMPLER: 'always_off',
    });
    const unset = await startGatewayProcess({ ...gatewayEnv, OTEL_SERVICE_NAME: 'gateway-unset' });
    others.push(off, unset);
    const offTrace = hex(16);
    expect((await toolsCall(off, { id: 10, traceparent: `00-${offTrace}-${hex(8)}-01` })).status).toBe(200);
    const unsetTrace = hex(16);
    const clientSpan = hex(8);
    expect(
      (await toolsCall(unset, { id: 11, traceparent: `00-${unsetTrace}-${clientSpan}-01` })).status,
    ).toBe(200);
    // Without an endpoint the gateway has no span of its own: the tool server's parent is the client's span.
    const [tl] = await receiver.waitFor(inTrace(unsetTrace, 'platform-tool-platform'));
    expect(tl!.parentSpanId).toBe(clientSpan);
    expect(unset.output()).not.toContain('tracing on');
    expect(off.output()).toContain('tracing on');
    // A stopped process has flushed whatever it would ever export.
    await Promise.all([off.stop(), unset.stop()]);
    const services = new Set(receiver.spans.map((s) => s.service));
    expect(services.has('gateway-sampling-off')).toBe(false);
    expect(services.has('gateway-unset')).toBe(false);
    // Sampled out at the gateway, the trace stays unsampled downstream: nothing of it anywhere.
    expect(receiver.spans.filter((s) => s.traceId === offTrace)).toEqual([]);
  });

  it("exports OTLP/HTTP protobuf, the specification's default protocol, when none is named", async () => {
    const proto = await startGatewayProcess({
      ...gatewayEnv,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_SERVICE_NAME: 'gateway-protobuf',
    });
    others.push(proto);
    expect((await toolsCall(proto, { id: 12 })).status).toBe(200);
    await proto.stop();
    expect(receiver.contentTypes).toContain('application/x-protobuf');
    const service = Buffer.from('gateway-protobuf').toString('latin1');
    expect(receiver.bodies.some((b) => b.includes(service))).toBe(true);
  });

  it('exports no token, code, secret, cookie or email', async () => {
    // Paths and queries that hold an email or a token: the IdP's spans name the route, never the path.
    const traceId = hex(16);
    const headers = { traceparent: `00-${traceId}-${hex(8)}-01`, authorization: `Bearer ${accessToken}` };
    await fetch(`${idp.issuer}/admin/api/users/${encodeURIComponent(user.email)}`, { headers });
    await fetch(
      `${idp.issuer}/oauth/authorize?login_hint=${encodeURIComponent(user.email)}&code=${secrets[2]}`,
      {
        headers: { ...headers, cookie: `authjs.session-token=${user.sessionToken}` },
        redirect: 'manual',
      },
    );
    const routes = (await receiver.waitFor(inTrace(traceId, 'platform-idp'), 2)).map((s) => s.name).sort();
    expect(routes).toEqual(['GET /admin/api/*', 'GET /oauth/authorize']);
    // Everything exported so far, byte for byte (span names, attributes, resources).
    expect(receiver.bodies.length).toBeGreaterThan(0);
    const everything = receiver.bodies.join('\n').toLowerCase();
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8);
      expect(everything.includes(secret.toLowerCase()), `exported: ${secret.slice(0, 12)}…`).toBe(false);
    }
    // Nor the email's local part or the session cookie's name with its value.
    expect(everything).not.toContain(user.email.split('@')[0]!.toLowerCase());
  });
});
