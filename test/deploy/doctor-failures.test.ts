// `platform doctor` against targets that are not a healthy deployment: every failed check is a FAIL row with
// the reason, the exit code is 1, nothing crashes and nothing hangs. Bad flags stop it before any request.
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/processes.ts';
import { row, runDoctor } from './support.ts';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function serve(handler: RequestListener): Promise<string> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

const SPEC_ROWS = ['#2', '#3', '#4', '#5', 'foreign Host', 'foreign Origin'];

describe('platform doctor against broken targets', () => {
  it('a server answering 200 to everything passes only the health row', async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
    const r = await runDoctor(['--base-url', base, '--service', 'platform']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('');
    expect(row(r.rows, 'platform', '#2').verdict).toBe('PASS');
    expect(row(r.rows, 'platform', '#3').detail).toContain('not a JSON object');
    expect(row(r.rows, 'platform', '#4').detail).toContain('answered 200 ok, expected 401');
    expect(row(r.rows, 'platform', '#5').detail).toContain('expected 401');
    expect(row(r.rows, 'platform', 'foreign Host').detail).toContain('expected 421');
    expect(row(r.rows, 'platform', 'foreign Origin').detail).toContain('expected 403');
    for (const ref of ['#3', '#4', '#5', 'foreign Host', 'foreign Origin']) {
      expect(row(r.rows, 'platform', ref).verdict).toBe('FAIL');
    }
    expect(row(r.rows, 'issuer', 'discovery').verdict).toBe('SKIP');
  });

  it('a server that challenges without resource_metadata or reasons, and guards nothing, fails those rows', async () => {
    const base = await serve((req, res) => {
      if (req.url === '/platform/health') return void res.writeHead(200).end();
      if (req.url === '/platform/.well-known/oauth-protected-resource') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ resource: 'https://elsewhere.example/platform/mcp', authorization_servers: [] }),
        );
      }
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="x"' });
      res.end(JSON.stringify({ error: { code: 'MISSING_TOKEN', message: 'no token' } }));
    });
    const r = await runDoctor(['--base-url', base, '--service', 'platform']);
    expect(r.code).toBe(1);
    const meta = row(r.rows, 'platform', '#3').detail;
    expect(meta).toContain(`expected "${base}/platform/mcp"`);
    expect(meta).toContain('authorization_servers names no issuer');
    expect(meta).toContain('scopes_supported lacks mcp:platform');
    expect(row(r.rows, 'platform', '#4').detail).toContain('carries no resource_metadata');
    const fake = row(r.rows, 'platform', '#5').detail;
    expect(fake).toContain('error.context.reason is missing');
    expect(fake).toContain('expected "INVALID_TOKEN"');
    expect(row(r.rows, 'platform', 'foreign Host').detail).toContain('no Host guard');
    expect(row(r.rows, 'platform', 'foreign Origin').detail).toContain('no Origin guard');
  });

  it('an unreachable base URL gives FAIL rows, not a crash', async () => {
    const base = `http://127.0.0.1:${await freePort()}`;
    const r = await runDoctor(['--base-url', base, '--service', 'platform,mail'], { PLATFORM_TOKEN: 'x' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('');
    for (const s of ['platform', 'mail']) {
      for (const ref of [...SPEC_ROWS, '#14']) {
        const x = row(r.rows, s, ref);
        expect(x.verdict).toBe('FAIL');
        expect(x.detail).toMatch(/ECONNREFUSED|fetch failed/);
      }
    }
  });

  it('a server that accepts and never answers is cut off at PLATFORM_DOCTOR_TIMEOUT', async () => {
    const sockets = new Set<Socket>();
    const tcp = createTcpServer((s) => {
      sockets.add(s);
      s.on('error', () => {});
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    closers.push(
      () =>
        new Promise((resolve) => {
          for (const s of sockets) s.destroy();
          tcp.close(() => resolve());
        }),
    );
    const base = `http://127.0.0.1:${(tcp.address() as { port: number }).port}`;
    const r = await runDoctor(['--base-url', base, '--service', 'platform'], {
      PLATFORM_DOCTOR_TIMEOUT: '1',
      PLATFORM_TOKEN: 'x',
    });
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(8000);
    for (const ref of SPEC_ROWS) expect(row(r.rows, 'platform', ref).detail).toContain('no answer from');
    expect(row(r.rows, 'platform', '#14').verdict).toBe('FAIL');
  });

  it('a bad flag or variable stops it before any request with one line and exit 2', async () => {
    const bad = await runDoctor(['--base-url', 'not-a-url']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe(
      'platform: configuration error: --base-url: must be an absolute http(s) URL, got "not-a-url"',
    );
    expect(bad.rows).toEqual([]);
    const service = await runDoctor(['--base-url', 'http://127.0.0.1:9', '--service', 'Platform!']);
    expect(service.code).toBe(2);
    expect(service.stderr).toContain('--service: "Platform!" is not a service name');
    const timeout = await runDoctor(['--base-url', 'http://127.0.0.1:9'], {
      PLATFORM_DOCTOR_TIMEOUT: 'soon',
    });
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toContain('PLATFORM_DOCTOR_TIMEOUT');
    const missing = await runDoctor([]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('--base-url');
  });
});
