// The MCP Inspector (npm @modelcontextprotocol/inspector, its CLI) runs for real with dynamic registration:
// it discovers, registers (`MCP Inspector`, native, none), prints the authorization URL and listens on its
// loopback callback; the user's answer is given without a browser (the consent page's own form, then the
// redirect delivered to the Inspector's listener); it exchanges the code and calls whoami through the gateway.
// A second run finds its stored access token refused and refreshes with its stored refresh token.
// The web Inspector calls discovery, register and token from the browser, so those need CORS (checked here as
// its page at http://localhost:6274 would send them).
// Sources:
// - DCR none, code+refresh, client_name "MCP Inspector", client_uri; callback /oauth/callback:
//   https://github.com/modelcontextprotocol/inspector/blob/v1/main/client/src/lib/auth.ts
// - application_type native (v2): https://github.com/modelcontextprotocol/inspector/blob/main/core/auth/providers.ts
// - CORS on well-known, register and token: https://github.com/modelcontextprotocol/inspector/issues/817
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { operatorSettings } from '../helpers/connect-settings.ts';
import { answerConsent, parseConsentForm, sessionCookieName } from '../helpers/oauth.ts';
import { freePort } from '../helpers/processes.ts';

const INSPECTOR = join(
  dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector/package.json')),
  'clients/launcher/build/index.js',
);
const ORIGIN = 'http://localhost:6274';

let r: ReplayStack;
let home: string;
let callback: string;

beforeAll(async () => {
  [r, home] = await Promise.all([
    startReplayStack(operatorSettings('inspector')),
    mkdtemp(join(tmpdir(), 'platform-inspector-')),
  ]);
  callback = `http://127.0.0.1:${await freePort()}/oauth/callback`;
}, 90_000);

afterAll(async () => {
  await r?.stop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** One `inspector --cli` run calling whoami; `approve` answers the consent page when it asks for one. */
async function runInspector(approve: boolean) {
  const child = spawn(
    process.execPath,
    [
      INSPECTOR,
      '--cli',
      ...['--server-url', r.serverUrl(), '--transport', 'http', '--callback-url', callback],
      ...['--method', 'tools/call', '--tool-name', 'whoami', '--format', 'json'],
    ],
    {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        MCP_AUTO_OPEN_ENABLED: 'true',
        MCP_INSPECTOR_SECRET_STORE: 'file',
        NO_COLOR: '1',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const output = () => `${out}\n${err}`;
  let authorizeUrl: string | undefined;
  if (approve) {
    authorizeUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no authorization URL:\n${output()}`)), 30_000);
      const check = () => {
        const m = /(http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+)/.exec(output());
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      child.stdout.on('data', check);
      child.stderr.on('data', check);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`inspector exited first:\n${output()}`));
      });
    });
    const cookieName = sessionCookieName(r.issuer);
    const page = await fetch(authorizeUrl, {
      redirect: 'manual',
      headers: { cookie: `${cookieName}=${r.user.sessionToken}` },
    });
    const html = await page.text();
    expect(parseConsentForm(html), html).toBeDefined();
    const answer = await answerConsent({
      url: authorizeUrl,
      html,
      sessionToken: r.user.sessionToken,
      cookieName,
      decision: 'approve',
    });
    expect(answer.location?.href.startsWith(`${callback}?`), answer.body).toBe(true);
    // The browser follows the redirect to the Inspector's listener.
    await (await fetch(answer.location!)).text();
  }
  const code = await Promise.race([
    exited,
    new Promise<null>((_, reject) =>
      setTimeout(() => reject(new Error(`inspector did not finish:\n${output()}`)), 30_000),
    ),
  ]);
  expect(code, output()).toBe(0);
  const result = out
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .pop();
  return {
    authorizeUrl: authorizeUrl ? new URL(authorizeUrl) : undefined,
    result: result ?? '',
    output: output(),
  };
}

describe('MCP Inspector', () => {
  it('answers CORS requests from the Inspector page on discovery, register and token (inspector#817)', async () => {
    for (const [method, url] of [
      ['GET', `${r.issuer}/.well-known/oauth-authorization-server`],
      ['POST', `${r.issuer}/oauth/register`],
      ['POST', `${r.issuer}/oauth/token`],
    ] as const) {
      const pre = await fetch(url, {
        method: 'OPTIONS',
        headers: {
          origin: ORIGIN,
          'access-control-request-method': method,
          'access-control-request-headers': 'content-type',
        },
      });
      await pre.body?.cancel();
      expect(pre.status, url).toBeLessThan(300);
      expect(pre.headers.get('access-control-allow-origin'), url).toBe('*');
    }
    const prm = await fetch(`${r.stack.baseUrl}/platform/.well-known/oauth-protected-resource`, {
      headers: { origin: ORIGIN },
    });
    await prm.body?.cancel();
    expect(prm.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('registers, signs in through the consent page, calls whoami, then refreshes a refused token on its next run', async () => {
    const first = await runInspector(true);
    expect(first.authorizeUrl!.searchParams.get('code_challenge_method')).toBe('S256');
    expect(first.authorizeUrl!.searchParams.get('resource')).toBe(r.serverUrl());
    expect(first.result).toContain(r.user.email);
    const registered = await r.stack.db.pool.query(
      "SELECT client_id FROM platform.oauth_clients WHERE name = 'MCP Inspector'",
    );
    expect(registered.rows).toHaveLength(1);
    expect(first.result).toContain(registered.rows[0].client_id);

    // The stored access token stops working (as when it expires): the next run refreshes with its refresh token.
    // (The Inspector keeps its tokens in its file secret store: ~/.mcp-inspector/secrets.json.)
    const statePath = join(home, '.mcp-inspector', 'secrets.json');
    const state = await readFile(statePath, 'utf8');
    const token = /access_token\\?":\s*\\?"([^"\\]+)/.exec(state)?.[1];
    expect(token, state).toBeDefined();
    await writeFile(statePath, state.replaceAll(token!, `${token!.slice(0, -8)}AAAAAAAA`));
    const second = await runInspector(false);
    expect(second.result).toContain(r.user.email);
    const grants = await r.stack.db.pool.query(
      'SELECT grant_type FROM platform.issuance_audit WHERE client_id = $1 ORDER BY 1',
      [registered.rows[0].client_id],
    );
    expect(grants.rows.map((g) => g.grant_type)).toEqual(['authorization_code', 'refresh_token']);
  }, 90_000);
});
