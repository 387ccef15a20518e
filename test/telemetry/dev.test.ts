// `platform dev` with an OTLP endpoint: the whole stack in one process exports as one service, `platform-dev`.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';

let receiver: OtlpReceiver;
let dataDir: string;
let dev: RunningProcess;
let ports: { idp: number; gateway: number };

beforeAll(async () => {
  [receiver, dataDir] = await Promise.all([
    startOtlpReceiver(),
    mkdtemp(join(tmpdir(), 'platform-dev-otel-')),
  ]);
  ports = { idp: await freePort(), gateway: await freePort() };
  dev = startPlatform(['dev'], {
    HOME: dataDir,
    PLATFORM_DEV_DATA_DIR: dataDir,
    IDP_PORT: String(ports.idp),
    GATEWAY_PORT: String(ports.gateway),
    PLATFORM_MCP_PORT: '0',
    MAIL_MCP_PORT: '0',
    DEALS_MCP_PORT: '0',
    LOG_LEVEL: 'info',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  await dev.waitFor(/platform dev is running/, 60_000);
}, 90_000);

afterAll(async () => {
  await dev?.stop();
  await receiver?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe('platform dev with tracing', () => {
  it("exports its IdP's and gateway's spans as platform-dev", async () => {
    const traceId = 'a'.repeat(31) + '1';
    const parent = 'b'.repeat(15) + '2';
    const headers = { traceparent: `00-${traceId}-${parent}-01` };
    expect((await fetch(`http://localhost:${ports.idp}/health/ready`, { headers })).status).toBe(200);
    expect(
      (await fetch(`http://localhost:${ports.gateway}/platform/mcp`, { method: 'POST', headers })).status,
    ).toBe(401);
    const spans = await receiver.waitFor((s) => s.traceId === traceId, 2);
    expect(spans.map((s) => s.service)).toEqual(['platform-dev', 'platform-dev']);
    expect(spans.map((s) => s.name).sort()).toEqual(['GET /health/ready', 'POST /platform/*']);
    for (const s of spans) expect(s.parentSpanId).toBe(parent);
  });
});
