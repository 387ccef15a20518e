// Attacks through the claims the gateway forwards to the tool servers:
// - a validly signed token whose sub, scope, client id, jti or email carries a control character or white space
//   at an end (header smuggling, a second identity that looks the same): INVALID_TOKEN `malformed_claim` at the
//   gateway, nothing forwarded;
// - an Entra user who sets the directory `email` attribute to an admin's address: the unconfirmed `email` is not
//   forwarded, so the mail tool server's admin rule (PLATFORM_ADMIN_EMAILS) never applies: send-as refused. The
//   same claims with `xms_edov` true (the domain owner verified the address) are the control.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { deriveIdentityKey } from '../../lib/identity.ts';
import {
  call,
  type EntraTenant,
  errorOf,
  type GatewayProcess,
  gatewayEnv,
  IDENTITY_SECRET,
  mailServiceToken,
  startEntra,
  startGatewayProcess,
} from '../gateway/helpers.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { sendMailAs } from '../helpers/mail.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';
import { toolJson } from '../tools/helpers.ts';

const BASE = 'https://mcp.claims.test';
const SECRET = 'claims-test-mail-shared-secret-0123456789abc';
const TENANT = '11111111-2222-3333-4444-555555555555';
const CLIENT_ID = '66666666-7777-4888-9999-000000000000';

let db: TestDatabase;
let admin: SeededUser;
let attacker: SeededUser;
let entra: EntraTenant;
let mail: RunningProcess;
let gateway: GatewayProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = await seedUser(db.pool, { email: `admin-${randomUUID().slice(0, 8)}@example.com` });
  attacker = await seedUser(db.pool, { email: `guest-${randomUUID().slice(0, 8)}@example.com` });
  entra = await startEntra(TENANT, CLIENT_ID);
  const port = await freePort();
  mail = startPlatform(['tool', 'mail'], {
    DATABASE_URL: db.url,
    TOOL_IDENTITY_KEY: deriveIdentityKey(IDENTITY_SECRET, 'mail'),
    MAIL_MCP_PORT: String(port),
    PLATFORM_ADMIN_EMAILS: admin.email,
  });
  await mail.waitFor(/mail tool server listening/, 20_000);
  gateway = await startGatewayProcess(
    gatewayEnv(
      { base: BASE, services: { mail: `http://127.0.0.1:${port}` }, entra, redisUrl: inject('redisUrl') },
      { MAIL_MCP_SHARED_SECRET: SECRET },
    ),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), mail?.stop()]);
  await entra?.close();
  await db?.drop();
});

function serviceToken(claims: Record<string, unknown>) {
  return mailServiceToken(SECRET, `${BASE}/mail/mcp`, {
    sub: attacker.sub,
    email: attacker.email,
    scope: 'mcp:mail',
    client_id: 'svc-client',
    ...claims,
  });
}

function entraToken(claims: Record<string, unknown>) {
  return entra.token({ jti: null, ...claims });
}

describe('claims with control characters or white space at an end', () => {
  it.each([
    ['sub with a bell character', { sub: 'user\u0007' }],
    ['sub with a trailing space', { sub: `${randomUUID()} ` }],
    ['scope with a newline', { scope: 'mcp:mail\nmcp:admin' }],
    ['scope with a leading space', { scope: ' mcp:mail' }],
    ['client id with a tab at the end', { client_id: 'svc-client\t' }],
    ['client id with DEL', { client_id: 'svc\u007fclient' }],
    ['jti with NUL', { jti: 'abc\u0000def' }],
    ['jti with a trailing space', { jti: `${randomUUID()} ` }],
    ['email with a carriage return inside', { email: `${'a'}\r@example.com` }],
    ['email with a C1 control', { email: 'a\u0085b@example.com' }],
  ])('%s: 401 INVALID_TOKEN malformed_claim at the gateway', async (_what, claims) => {
    const r = await call(`${gateway.url}/mail/mcp`, { method: 'POST', token: await serviceToken(claims) });
    expect(r.status).toBe(401);
    expect(errorOf(r)).toMatchObject({ code: 'INVALID_TOKEN', reason: 'malformed_claim' });
  });

  it('the same token with clean claims goes through (the control)', async () => {
    const r = await call(`${gateway.url}/mail/mcp`, {
      method: 'POST',
      token: await serviceToken({}),
      headers: { accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'c', version: '0' } },
      }),
    });
    expect(r.status).toBe(200);
  });
});

const sendAs = (token: string, asUser: string) => sendMailAs(gateway.url, token, asUser);

describe("an Entra token's email claim and the tool servers' admin rule", () => {
  // Both carry the send-as power in their scope (docs/tools.md § mail): only the email decides here.
  const SCP = { scp: 'mcp.access mail:send_as' };
  it('an unconfirmed email naming an admin does not make its holder an admin: send-as refused', async () => {
    const t = await entraToken({ ...SCP, email: admin.email, preferred_username: attacker.email });
    const r = await sendAs(t, admin.email);
    expect(r.isError).toBe(true);
    expect(toolJson(r)).toMatchObject({ error: { code: 'send_as_forbidden' } });
  });

  it('the same address confirmed by xms_edov (or by preferred_username) is the admin: send-as allowed', async () => {
    for (const confirmation of [
      { xms_edov: true, preferred_username: attacker.email },
      { preferred_username: admin.email },
    ]) {
      const t = await entraToken({ ...SCP, email: admin.email, ...confirmation });
      const r = await sendAs(t, attacker.email);
      expect(r.isError, JSON.stringify(confirmation)).toBeFalsy();
    }
  });
});
