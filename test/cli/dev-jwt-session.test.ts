// `platform dev --session jwt`: the development sign-in page plays a web application on Auth.js's JWT session
// strategy. Its cookie is an Auth.js session token (Auth.js itself decodes it with the secret dev keeps), no
// `sessions` row is involved, and the IdP of the same stack signs the user in with it.
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authjsJwt } from '../helpers/authjs.ts';
import { authorizeRequest, exchangeCode, LOOPBACK } from '../helpers/oauth.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';

const COOKIE = 'authjs.session-token';
let dataDir: string;
let stack: RunningProcess | undefined;
let issuer: string;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'platform-dev-jwt-'));
  const ports = { idp: await freePort(), gateway: await freePort() };
  issuer = `http://localhost:${ports.idp}`;
  stack = startPlatform(['dev', '--session', 'jwt'], {
    PLATFORM_DEV_DATA_DIR: dataDir,
    IDP_PORT: String(ports.idp),
    GATEWAY_PORT: String(ports.gateway),
    PLATFORM_MCP_PORT: '0',
    MAIL_MCP_PORT: '0',
    DEALS_MCP_PORT: '0',
    LOG_LEVEL: 'warn',
  });
  await stack.waitFor(/platform dev is running/, 45_000);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('platform dev --session jwt', () => {
  it('signs in with an Auth.js JWT-strategy cookie that the IdP of the stack accepts', async () => {
    const secretFile = join(dataDir, 'dev-authjs-secret');
    expect(stack!.output()).toContain(`Auth.js JWT strategy (--session jwt), sealed under ${secretFile}`);
    expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
    const signIn = await fetch(`${issuer}/api/auth/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'Jo.Jwt@example.com', callbackUrl: '' }),
    });
    expect(signIn.status).toBe(200);
    const set = signIn.headers.getSetCookie();
    expect(set).toHaveLength(1);
    const value = /^authjs\.session-token=([^;]+);/.exec(set[0]!)![1]!;
    // Auth.js itself reads it with the secret dev keeps.
    const { decode } = await authjsJwt();
    const claims = await decode({ token: value, secret: await readFile(secretFile, 'utf8'), salt: COOKIE });
    expect(claims).toMatchObject({ email: 'jo.jwt@example.com', auth_time: expect.any(Number) });

    const r = await authorizeRequest({ issuer, sessionToken: value, cookieName: COOKIE, params: {} });
    const code = r.location?.searchParams.get('code');
    expect(code, `${r.status} ${r.location} ${r.body}`).toBeTruthy();
    const tokens = await exchangeCode(issuer, {
      code: code!,
      verifier: r.verifier,
      redirectUri: LOOPBACK,
      clientId: 'platform-cli',
    });
    expect(tokens.status, tokens.text).toBe(200);
    expect(decodeJwt(tokens.json.access_token as string).email).toBe('jo.jwt@example.com');
  });
});
