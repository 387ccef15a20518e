// `entra` connections against a local stand-in for Entra's token endpoint: the refresh token of the user's
// Auth.js account is redeemed with the connection's client credentials and scopes, what comes back (Entra rotates
// refresh tokens) is kept in our own store, and the web application's tables are never written.
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { GrantSealer } from '../../idp/connections/seal.ts';
import { type ConnectionsService, createConnections } from '../../idp/connections/service.ts';
import { createPool } from '../../lib/db.ts';
import { createLogger } from '../../lib/logger.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { testSigningKeyPem } from '../helpers/processes.ts';

const KEY = 'k7Qm2Zp9Vx4Lr8Tn3Wb6Yc1Hd5Jf0Gs2Ae9Uq';
const LOGIN = 'https://app.example.com/api/auth/signin';

let db: TestDatabase;
let server: Server;
let svc: ConnectionsService;
let pool: { end(): Promise<void> };
/** Refresh tokens the stand-in still accepts; each is good once (rotation). */
const valid = new Set<string>();
const seen: Array<Record<string, string>> = [];
let issued = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(body));
      seen.push(form);
      const ok =
        req.url === '/contoso/oauth2/v2.0/token' &&
        form.grant_type === 'refresh_token' &&
        form.client_id === 'web-app' &&
        form.client_secret === 'web-app-secret' &&
        valid.delete(form.refresh_token ?? '');
      if (!ok) {
        res.writeHead(400, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: 'invalid_grant', error_description: 'AADSTS70000' }));
      }
      issued++;
      const next = `entra-rt-${issued + 1}`;
      valid.add(next);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          token_type: 'Bearer',
          access_token: `entra-at-${issued}`,
          refresh_token: next,
          expires_in: 3600,
          scope: form.scope,
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const secretFile = join(tmpdir(), `entra-secret-${process.pid}`);
  await writeFile(secretFile, 'web-app-secret\n');
  const file = join(tmpdir(), `entra-connections-${process.pid}.yaml`);
  await writeFile(
    file,
    `connections:
  - name: graph
    kind: entra
    tenant_id: contoso
    client_id: web-app
    client_secret_file: ${secretFile}
    scopes: [offline_access, Mail.Send]
    token_endpoint: http://127.0.0.1:${port}/contoso/oauth2/v2.0/token
  - name: graph-down
    kind: entra
    tenant_id: contoso
    client_id: web-app
    client_secret_file: ${secretFile}
    scopes: [offline_access]
    token_endpoint: http://127.0.0.1:1/token
`,
  );
  const config = loadIdpConfig(
    {
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      PLATFORM_LOGIN_URL: LOGIN,
      DATABASE_URL: db.url,
      PLATFORM_CONNECTIONS_FILE: file,
      PLATFORM_CONNECTIONS_KEY: KEY,
    },
    { redisRequired: false },
  );
  const log = createLogger({ name: 'idp', level: 'silent' });
  const p = createPool(config.databaseUrl, log);
  pool = p;
  svc = createConnections({ pool: p, config, log });
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await new Promise((r) => server?.close(r));
  await db?.drop();
});

const userOf = (u: SeededUser) => ({ userId: String(u.id), email: u.email });
const accountToken = async (u: SeededUser) =>
  (await db.pool.query(`SELECT refresh_token FROM accounts WHERE "userId" = $1`, [u.id])).rows[0]
    ?.refresh_token;

it('redeems the Auth.js refresh token once, keeps the rotated one in our store, never writes accounts', async () => {
  const u = await seedUser(db.pool);
  await db.pool.query(`UPDATE accounts SET refresh_token = 'entra-rt-1' WHERE "userId" = $1`, [u.id]);
  valid.add('entra-rt-1');
  const t = await svc.accessToken(userOf(u), 'graph');
  expect(t).toMatchObject({ ok: true, accessToken: 'entra-at-1', scope: 'offline_access Mail.Send' });
  expect(seen.at(-1)).toMatchObject({ refresh_token: 'entra-rt-1', scope: 'offline_access Mail.Send' });
  expect(await accountToken(u)).toBe('entra-rt-1');
  const [graph] = await svc.list(userOf(u));
  expect(graph).toMatchObject({ name: 'graph', kind: 'entra', connected: true, connect_uri: LOGIN });
  // Fresh: answered from the store, the stand-in not asked again.
  const asked = seen.length;
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({ ok: true, accessToken: 'entra-at-1' });
  expect(seen.length).toBe(asked);
  // Due: refreshed with the rotated token from our store, not the account's (spent) one.
  const sealer = new GrantSealer(KEY);
  const { rows } = await db.pool.query(`SELECT sealed FROM platform.connection_grants WHERE user_id = $1`, [
    String(u.id),
  ]);
  const g = sealer.open(String(u.id), 'graph', rows[0].sealed);
  expect(g.refreshToken).toBe('entra-rt-2');
  await db.pool.query(`UPDATE platform.connection_grants SET sealed = $1 WHERE user_id = $2`, [
    sealer.seal(String(u.id), 'graph', { ...g, expiresAt: Date.now() }),
    String(u.id),
  ]);
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({ ok: true, accessToken: 'entra-at-2' });
  expect(seen.at(-1)).toMatchObject({ refresh_token: 'entra-rt-2' });
  expect(await accountToken(u)).toBe('entra-rt-1');
});

it('no account row or no refresh token in it: not connected, and the connect URI is PLATFORM_LOGIN_URL', async () => {
  const none = await seedUser(db.pool, { entraOid: null });
  expect(await svc.accessToken(userOf(none), 'graph')).toMatchObject({
    ok: false,
    error: 'interaction_required',
    connectUri: LOGIN,
  });
  const empty = await seedUser(db.pool);
  expect(await svc.accessToken(userOf(empty), 'graph')).toMatchObject({ ok: false, connectUri: LOGIN });
  expect((await svc.list(userOf(empty)))[0]).toMatchObject({
    name: 'graph',
    connected: false,
    connect_uri: LOGIN,
  });
  expect(svc.connectUri('graph')).toBe(LOGIN);
});

it('a refresh token Entra refuses: not connected, nothing stored', async () => {
  const u = await seedUser(db.pool);
  await db.pool.query(`UPDATE accounts SET refresh_token = 'entra-rt-revoked' WHERE "userId" = $1`, [u.id]);
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({ ok: false, connectUri: LOGIN });
  const { rowCount } = await db.pool.query(`SELECT 1 FROM platform.connection_grants WHERE user_id = $1`, [
    String(u.id),
  ]);
  expect(rowCount).toBe(0);
});

it('an upstream that cannot be reached: temporarily_unavailable (503), nothing stored or dropped', async () => {
  const u = await seedUser(db.pool);
  await db.pool.query(`UPDATE accounts SET refresh_token = 'entra-rt-x' WHERE "userId" = $1`, [u.id]);
  await expect(svc.accessToken(userOf(u), 'graph-down')).rejects.toMatchObject({
    error: 'temporarily_unavailable',
    status: 503,
  });
  expect(await accountToken(u)).toBe('entra-rt-x');
  const { rowCount } = await db.pool.query(`SELECT 1 FROM platform.connection_grants WHERE user_id = $1`, [
    String(u.id),
  ]);
  expect(rowCount).toBe(0);
});

it('disconnecting an entra connection: the sign-in’s refresh token is not redeemed again until a new one comes', async () => {
  const u = await seedUser(db.pool);
  await db.pool.query(`UPDATE accounts SET refresh_token = 'entra-rt-d1' WHERE "userId" = $1`, [u.id]);
  valid.add('entra-rt-d1');
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({ ok: true });
  expect(await svc.disconnect(userOf(u), 'graph', { clientId: 'test' })).toEqual({
    disconnected: true,
    revoked: false,
  });
  const asked = seen.length;
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({
    ok: false,
    description: expect.stringContaining('disconnected'),
    connectUri: LOGIN,
  });
  expect(seen.length).toBe(asked);
  expect((await svc.list(userOf(u)))[0]).toMatchObject({ connected: false });
  expect(await svc.disconnect(userOf(u), 'graph', { clientId: 'test' })).toEqual({
    disconnected: false,
    revoked: false,
  });
  // The user signs in again: the web application stores a new refresh token, which connects.
  await db.pool.query(`UPDATE accounts SET refresh_token = 'entra-rt-d2' WHERE "userId" = $1`, [u.id]);
  valid.add('entra-rt-d2');
  expect((await svc.list(userOf(u)))[0]).toMatchObject({ connected: true });
  expect(await svc.accessToken(userOf(u), 'graph')).toMatchObject({ ok: true });
});
