// Connections (docs/connections.md) against real parts: a `platform idp` process, its Postgres, headless Chromium
// and oidc-provider as the upstream authorization server (PKCE, refresh rotation, revocation). The store's
// accessToken() — what the token endpoint's exchange calls — runs in this process over the same database and
// configuration, twice, as two replicas would.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { GrantSealer } from '../../idp/connections/seal.ts';
import { type ConnectionsService, createConnections } from '../../idp/connections/service.ts';
import { createPool } from '../../lib/db.ts';
import { createLogger } from '../../lib/logger.ts';
import { launchChromium, runPlatform, tempConfigHome } from '../cli/support.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { sessionCookieName, signIn } from '../helpers/oauth.ts';
import { freePort, type IdpProcess, startIdpProcess, testSigningKeyPem } from '../helpers/processes.ts';
import { startUpstreamAs, type UpstreamAs } from '../helpers/upstream-as.ts';

const KEY = 'k7Qm2Zp9Vx4Lr8Tn3Wb6Yc1Hd5Jf0Gs2Ae9Uq';
const NAME = 'acme';

let db: TestDatabase;
let idp: IdpProcess;
let upstream: UpstreamAs;
let browser: Browser;
let alice: SeededUser;
let bob: SeededUser;
let admin: SeededUser;
let replicaA: ConnectionsService;
let replicaB: ConnectionsService;
let serviceLines = '';
let env: Record<string, string>;
let file: string;
const pools: Array<{ end(): Promise<void> }> = [];
const sealer = new GrantSealer(KEY);

function connectionsFile(extra = ''): string {
  return `connections:
  - name: ${NAME}
    kind: oauth
    display_name: Acme Cloud
    issuer: ${upstream.issuer}
    client_id: ${upstream.clientId}
    client_secret_file: ${join(tmpdir(), `acme-secret-${process.pid}`)}
    scopes: [openid, offline_access, repo]
  - name: acme-api
    kind: oauth
    issuer: ${upstream.issuer}
    client_id: ${upstream.clientId}
    scopes: [repo]
    resource: https://api.acme.example/
${extra}`;
}

function replica(): ConnectionsService {
  const config = loadIdpConfig(env, { redisRequired: false });
  const sink = new Writable({
    write(chunk, _enc, done) {
      serviceLines += chunk.toString();
      done();
    },
  });
  const log = createLogger({ name: 'idp', level: 'trace', destination: sink });
  const pool = createPool(config.databaseUrl, log, { max: 10 });
  pools.push(pool);
  return createConnections({ pool, config, log });
}

beforeAll(async () => {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  [db, browser, upstream] = await Promise.all([
    createTestDatabase(),
    launchChromium(),
    startUpstreamAs({ redirectUris: [`${issuer}/connections/${NAME}/callback`] }),
  ]);
  await writeFile(join(tmpdir(), `acme-secret-${process.pid}`), upstream.clientSecret);
  file = join(tmpdir(), `connections-${process.pid}.yaml`);
  await writeFile(file, connectionsFile());
  alice = await seedUser(db.pool);
  bob = await seedUser(db.pool);
  admin = await seedUser(db.pool);
  env = {
    PLATFORM_CONNECTIONS_FILE: file,
    PLATFORM_CONNECTIONS_KEY: KEY,
    PLATFORM_ADMIN_EMAILS: admin.email,
    PUBLIC_BASE_URL: 'https://platform.example.com',
    LOG_LEVEL: 'trace',
  };
  idp = await startIdpProcess({ databaseUrl: db.url, redisUrl: inject('redisUrl'), env, port });
  env = {
    ...env,
    PLATFORM_OIDC_ISSUER: idp.issuer,
    PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
    PLATFORM_AUDIENCE: idp.audience,
    DATABASE_URL: db.url,
  };
  replicaA = replica();
  replicaB = replica();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await idp?.stop();
  await upstream?.close();
  await Promise.all(pools.map((p) => p.end()));
  await db?.drop();
});

const userOf = (u: SeededUser) => ({ userId: String(u.id), email: u.email });

/** The user connects in Chromium through the IdP's pages; returns the final page and its response headers. */
async function connectInBrowser(u: SeededUser, o: { returnTo?: string } = {}) {
  const context = await browser.newContext();
  try {
    await context.addCookies([
      { name: sessionCookieName(idp.issuer), value: u.sessionToken, url: idp.issuer },
    ]);
    const page = await context.newPage();
    const start = new URL(`${idp.issuer}/connections/${NAME}`);
    if (o.returnTo) start.searchParams.set('return_to', o.returnTo);
    const finished = page.waitForResponse((r) =>
      r.url().startsWith(`${idp.issuer}/connections/${NAME}/callback`),
    );
    await page.goto(start.toString());
    const response = await finished;
    return {
      text: await page.locator('main').innerText(),
      html: await response.text(),
      headers: response.headers(),
      status: response.status(),
    };
  } finally {
    await context.close();
  }
}

/**
 * The connect flow walked without following the upstream's last redirect: the callback URL (code and state) the
 * user's browser would open next, unopened. The upstream's cookies are kept in a small jar.
 */
async function callbackUrlFor(u: SeededUser): Promise<string> {
  const start = await fetch(`${idp.issuer}/connections/${NAME}`, {
    headers: { cookie: `${sessionCookieName(idp.issuer)}=${u.sessionToken}` },
    redirect: 'manual',
  });
  let next = new URL(start.headers.get('location')!);
  const jar = new Map<string, string>();
  for (let i = 0; i < 10; i++) {
    if (next.origin === idp.issuer) return next.toString();
    const res = await fetch(next, {
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
      redirect: 'manual',
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    await res.body?.cancel();
    next = new URL(res.headers.get('location')!, next);
  }
  throw new Error('the upstream never sent the browser back');
}

async function storedRow(u: SeededUser) {
  const { rows } = await db.pool.query<{
    sealed: Buffer;
    upstream_subject: string | null;
    scope: string | null;
  }>(
    'SELECT sealed, upstream_subject, scope FROM platform.connection_grants WHERE user_id = $1 AND connection = $2',
    [String(u.id), NAME],
  );
  return rows[0];
}

/** The stored grant re-sealed as due for refresh (its sealed expiry set to now): the test holds the key. */
async function makeDue(u: SeededUser) {
  const row = (await storedRow(u))!;
  const g = sealer.open(String(u.id), NAME, row.sealed);
  await db.pool.query(
    'UPDATE platform.connection_grants SET sealed = $1 WHERE user_id = $2 AND connection = $3',
    [sealer.seal(String(u.id), NAME, { ...g, expiresAt: Date.now() }), String(u.id), NAME],
  );
  return g;
}

describe('connect flow', () => {
  it('a signed-in user connects in the browser: the grant is stored sealed, the page says what was connected', async () => {
    const r = await connectInBrowser(alice, { returnTo: 'http://127.0.0.1:8765/done' });
    expect(r!.status).toBe(200);
    expect(r!.text).toContain('Acme Cloud is connected');
    expect(r!.html).toContain('href="http://127.0.0.1:8765/done"');
    expect(r!.headers['x-content-type-options']).toBe('nosniff');
    expect(r!.headers['referrer-policy']).toBe('no-referrer');
    expect(r!.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    const row = await storedRow(alice);
    expect(row?.upstream_subject).toBe('upstream-alice');
    const g = sealer.open(String(alice.id), NAME, row!.sealed);
    expect(upstream.issuedTokens).toContain(g.accessToken);
    expect(upstream.issuedTokens).toContain(g.refreshToken);
    // Only sealed: neither token is anywhere in the row's plain columns.
    const plain = JSON.stringify((await db.pool.query('SELECT * FROM platform.connection_grants')).rows);
    expect(plain).not.toContain(g.accessToken);
    // The upstream saw PKCE S256.
    expect(upstream.grants.authorization_code).toBe(1);
  });

  it('return_to off the allowed origins is ignored; PUBLIC_BASE_URL’s origin is followed', async () => {
    const off = await connectInBrowser(bob, { returnTo: 'https://evil.example/steal' });
    expect(off!.status).toBe(200);
    expect(off!.html).not.toContain('evil.example');
    const on = await connectInBrowser(bob, { returnTo: 'https://platform.example.com/tools' });
    expect(on!.html).toContain('href="https://platform.example.com/tools"');
  });

  it('without a web session the connect page sends the browser to sign in', async () => {
    const res = await fetch(`${idp.issuer}/connections/${NAME}`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toContain('callbackUrl=');
    expect(res.headers.get('location')).toContain(encodeURIComponent(`/connections/${NAME}`));
  });

  it('CSRF: a callback carrying another session’s state is refused and nothing is stored', async () => {
    const attacker = await seedUser(db.pool);
    const victim = await seedUser(db.pool);
    // The attacker goes through the upstream in their own browser and keeps the callback URL (code and state).
    const captured = await callbackUrlFor(attacker);
    expect(captured).toContain('code=');
    // ... and makes the victim's browser open it.
    const res = await fetch(captured, {
      headers: { cookie: `${sessionCookieName(idp.issuer)}=${victim.sessionToken}` },
      redirect: 'manual',
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('another session');
    expect(await storedRow(victim)).toBeUndefined();
    expect(await storedRow(attacker)).toBeUndefined();
    // The state is spent: the attacker's own session cannot use it afterwards either.
    const again = await fetch(captured, {
      headers: { cookie: `${sessionCookieName(idp.issuer)}=${attacker.sessionToken}` },
      redirect: 'manual',
    });
    expect(again.status).toBe(400);
    expect(await storedRow(attacker)).toBeUndefined();
  });

  it('a replayed state, a missing state and an upstream error are refused with nothing stored', async () => {
    const carol = await seedUser(db.pool);
    const cookie = `${sessionCookieName(idp.issuer)}=${carol.sessionToken}`;
    const captured = await callbackUrlFor(carol);
    const first = await fetch(captured, { headers: { cookie }, redirect: 'manual' });
    expect(first.status).toBe(200);
    await db.pool.query('DELETE FROM platform.connection_grants WHERE user_id = $1', [String(carol.id)]);
    const replay = await fetch(captured, { headers: { cookie }, redirect: 'manual' });
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('already used');
    expect(await storedRow(carol)).toBeUndefined();

    const noState = await fetch(`${idp.issuer}/connections/${NAME}/callback?code=abc`, {
      headers: { cookie },
    });
    expect(noState.status).toBe(400);
    expect(noState.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");

    // An upstream error with a valid state of this session.
    const start = await fetch(`${idp.issuer}/connections/${NAME}`, {
      headers: { cookie },
      redirect: 'manual',
    });
    const state = new URL(start.headers.get('location')!).searchParams.get('state')!;
    const denied = await fetch(
      `${idp.issuer}/connections/${NAME}/callback?error=access_denied&state=${encodeURIComponent(state)}`,
      { headers: { cookie } },
    );
    expect(denied.status).toBe(400);
    expect(await denied.text()).toContain('access_denied');
    expect(await storedRow(carol)).toBeUndefined();
  });

  it('RFC 9207: an answer naming another issuer is refused (mix-up), nothing stored', async () => {
    const jack = await seedUser(db.pool);
    const captured = new URL(await callbackUrlFor(jack));
    expect(captured.searchParams.get('iss')).toBe(upstream.issuer);
    captured.searchParams.set('iss', 'https://evil.example');
    const res = await fetch(captured, {
      headers: { cookie: `${sessionCookieName(idp.issuer)}=${jack.sessionToken}` },
      redirect: 'manual',
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('does not come from');
    expect(await storedRow(jack)).toBeUndefined();
  });

  it('the authorization request carries PKCE S256 and a state', async () => {
    const cookie = `${sessionCookieName(idp.issuer)}=${alice.sessionToken}`;
    const start = await fetch(`${idp.issuer}/connections/${NAME}`, {
      headers: { cookie },
      redirect: 'manual',
    });
    const to = new URL(start.headers.get('location')!);
    expect(to.origin).toBe(upstream.issuer);
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    expect(to.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(to.searchParams.get('state')!.length).toBeGreaterThanOrEqual(43);
    expect(to.searchParams.get('redirect_uri')).toBe(`${idp.issuer}/connections/${NAME}/callback`);
    expect(to.searchParams.has('resource')).toBe(false);
    // RFC 8707: a connection with a resource names it at the upstream's authorization endpoint.
    const withResource = await fetch(`${idp.issuer}/connections/acme-api`, {
      headers: { cookie },
      redirect: 'manual',
    });
    expect(new URL(withResource.headers.get('location')!).searchParams.get('resource')).toBe(
      'https://api.acme.example/',
    );
  });
});

describe('stored grants', () => {
  it('accessToken answers the stored token while it is fresh', async () => {
    const g = sealer.open(String(alice.id), NAME, (await storedRow(alice))!.sealed);
    const t = await replicaA.accessToken(userOf(alice), NAME);
    expect(t).toMatchObject({ ok: true, accessToken: g.accessToken });
  });

  it('a sealed grant moved to another user’s row is refused and never used', async () => {
    const dave = await seedUser(db.pool);
    const row = (await storedRow(alice))!;
    await db.pool.query(
      `INSERT INTO platform.connection_grants (user_id, connection, email, sealed) VALUES ($1, $2, $3, $4)`,
      [String(dave.id), NAME, dave.email, row.sealed],
    );
    const before = upstream.requests.length;
    const t = await replicaA.accessToken(userOf(dave), NAME);
    expect(t).toMatchObject({ ok: false, error: 'interaction_required' });
    expect(JSON.stringify(t)).not.toContain(sealer.open(String(alice.id), NAME, row.sealed).accessToken);
    expect(upstream.requests.length).toBe(before);
  });

  it('an altered sealed grant is refused and never used', async () => {
    const erin = await seedUser(db.pool);
    await connectInBrowser(erin);
    const row = (await storedRow(erin))!;
    const altered = Buffer.from(row.sealed);
    altered[20] = altered[20]! ^ 1;
    await db.pool.query('UPDATE platform.connection_grants SET sealed = $1 WHERE user_id = $2', [
      altered,
      String(erin.id),
    ]);
    const t = await replicaA.accessToken(userOf(erin), NAME);
    expect(t).toMatchObject({ ok: false, error: 'interaction_required' });
  });

  it('a grant due for refresh is refreshed once for 20 concurrent callers on two replicas', async () => {
    const old = await makeDue(alice);
    const before = upstream.grants.refresh_token ?? 0;
    // The upstream holds its answer until both replicas are committed to the refresh: one asking the upstream and
    // the other waiting for its lock (or, were there no lock, asking the upstream too).
    let release = () => {};
    upstream.hold = new Promise<void>((r) => {
      release = r;
    });
    const tokenRequests = () => upstream.requests.filter((r) => r === 'POST /token').length;
    const requestsBefore = tokenRequests();
    const calls = Array.from({ length: 20 }, (_, i) =>
      (i % 2 ? replicaA : replicaB).accessToken(userOf(alice), NAME),
    );
    for (;;) {
      const waiting = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (
        tokenRequests() - requestsBefore >= 2 ||
        (tokenRequests() > requestsBefore && waiting.rows[0]!.n >= 1)
      )
        break;
      await new Promise((r) => setTimeout(r, 10));
    }
    upstream.hold = undefined;
    release();
    const answers = await Promise.all(calls);
    expect((upstream.grants.refresh_token ?? 0) - before).toBe(1);
    const tokens = new Set(answers.map((a) => (a.ok ? a.accessToken : a.error)));
    expect(tokens.size).toBe(1);
    const [token] = [...tokens];
    expect(token).not.toBe(old.accessToken);
    const audited = await db.pool.query(
      `SELECT count(*)::int AS n FROM platform.issuance_audit WHERE user_id = $1 AND grant_type = 'connection:refresh'`,
      [String(alice.id)],
    );
    expect(audited.rows[0].n).toBe(1);
    expect(upstream.issuedTokens).toContain(token);
    // The rotated refresh token replaced the old one.
    const now = sealer.open(String(alice.id), NAME, (await storedRow(alice))!.sealed);
    expect(now.refreshToken).not.toBe(old.refreshToken);
  });

  it('the upstream refusing the refresh drops the grant: interaction_required with the connect URI', async () => {
    const frank = await seedUser(db.pool);
    await connectInBrowser(frank);
    const g = await makeDue(frank);
    // The grant ends at the upstream (revoked there by someone else).
    const res = await fetch(`${upstream.issuer}/token/revocation`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${upstream.clientId}:${upstream.clientSecret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ token: g.refreshToken!, token_type_hint: 'refresh_token' }),
    });
    expect(res.status).toBe(200);
    const t = await replicaA.accessToken(userOf(frank), NAME);
    expect(t).toEqual({
      ok: false,
      error: 'interaction_required',
      description: expect.stringContaining('refused'),
      connectUri: `${idp.issuer}/connections/${NAME}`,
    });
    expect(await storedRow(frank)).toBeUndefined();
  });
});

describe('managing', () => {
  it('the user lists and disconnects; the upstream revocation endpoint (from metadata) is called', async () => {
    const { access_token } = await signIn(idp.issuer, bob.sessionToken);
    const auth = { authorization: `Bearer ${access_token}` };
    const list = await fetch(`${idp.issuer}/connections`, { headers: auth });
    expect(list.status).toBe(200);
    const body = (await list.json()) as { connections: Array<Record<string, unknown>> };
    expect(body.connections).toEqual([
      expect.objectContaining({ name: NAME, connected: true, upstream_subject: 'upstream-alice' }),
      {
        name: 'acme-api',
        kind: 'oauth',
        display_name: 'acme-api',
        connected: false,
        connected_at: null,
        upstream_subject: null,
        scopes: [],
        expires_at: null,
        connect_uri: `${idp.issuer}/connections/acme-api`,
      },
    ]);
    const g = sealer.open(String(bob.id), NAME, (await storedRow(bob))!.sealed);
    const revokedBefore = upstream.revocations;
    const del = await fetch(`${idp.issuer}/connections/${NAME}`, { method: 'DELETE', headers: auth });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ connection: NAME, disconnected: true, revoked: true });
    expect(upstream.revocations).toBeGreaterThan(revokedBefore);
    expect(await storedRow(bob)).toBeUndefined();
    // The refresh token no longer works at the upstream.
    const refresh = await fetch(`${upstream.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${upstream.clientId}:${upstream.clientSecret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: g.refreshToken! }),
    });
    expect(refresh.status).toBe(400);
    const { rows } = await db.pool.query(
      `SELECT grant_type, connection FROM platform.issuance_audit WHERE user_id = $1 ORDER BY id`,
      [String(bob.id)],
    );
    expect(rows.filter((r) => r.connection === NAME).map((r) => r.grant_type)).toEqual([
      'connection:connect',
      'connection:connect',
      'connection:disconnect',
    ]);
  });

  it('an administrator lists and disconnects through the admin API; answers and audit carry no upstream token', async () => {
    const { access_token } = await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' });
    const list = await callAdminApi(
      idp.issuer,
      access_token,
      'GET',
      `/admin/api/connections?email=${alice.email}`,
    );
    expect(list.status).toBe(200);
    expect(list.json.connections).toEqual([
      expect.objectContaining({ name: NAME, connected: true }),
      expect.objectContaining({ name: 'acme-api', connected: false }),
    ]);
    const off = await callAdminApi(idp.issuer, access_token, 'POST', '/admin/api/disconnect', {
      email: alice.email,
      connection: NAME,
    });
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ disconnected: true, revoked: true });
    const audit = await callAdminApi(
      idp.issuer,
      access_token,
      'GET',
      `/admin/api/audit?email=${alice.email}&limit=100`,
    );
    expect(JSON.stringify(audit.json)).toContain('"connection":"acme"');
    const everything = [
      JSON.stringify(list.json),
      JSON.stringify(off.json),
      JSON.stringify(audit.json),
      JSON.stringify((await db.pool.query('SELECT * FROM platform.issuance_audit')).rows),
      JSON.stringify((await db.pool.query('SELECT * FROM platform.admin_audit')).rows),
    ].join('\n');
    for (const t of upstream.issuedTokens) expect(everything).not.toContain(t);
  });

  it('the console’s user page lists the connection and disconnects it; the page shows no token', async () => {
    const gina = await seedUser(db.pool);
    await connectInBrowser(gina);
    const context = await browser.newContext();
    try {
      await context.addCookies([
        { name: sessionCookieName(idp.issuer), value: admin.sessionToken, url: idp.issuer },
      ]);
      const page = await context.newPage();
      const res = await page.goto(`${idp.issuer}/admin/users/${encodeURIComponent(gina.email)}`);
      expect(res!.status()).toBe(200);
      const section = page.locator('section', { has: page.locator('h2', { hasText: 'Connections' }) });
      await expect.poll(() => section.innerText()).toContain('Acme Cloud');
      expect(await section.innerText()).toContain('connected');
      expect(await section.innerText()).toContain('upstream-alice');
      const html = await page.content();
      for (const t of upstream.issuedTokens) expect(html).not.toContain(t);
      const revokedBefore = upstream.revocations;
      await Promise.all([
        page.waitForNavigation(),
        section.locator('button', { hasText: 'Disconnect' }).click(),
      ]);
      expect(await page.locator('body').innerText()).toContain('Disconnected acme');
      expect(await storedRow(gina)).toBeUndefined();
      expect(upstream.revocations).toBeGreaterThan(revokedBefore);
    } finally {
      await context.close();
    }
  });

  it('the command line: platform connections [--json], connections disconnect, admin connections and admin disconnect', async () => {
    const hana = await seedUser(db.pool);
    await connectInBrowser(hana);
    const home = await tempConfigHome();
    const { access_token: user } = await signIn(idp.issuer, hana.sessionToken);
    const { access_token: adminToken } = await signIn(idp.issuer, admin.sessionToken, {
      scope: 'platform:admin',
    });
    const run = (args: string[], token: string) =>
      runPlatform(args, { XDG_CONFIG_HOME: home.dir, PLATFORM_ISSUER: idp.issuer, PLATFORM_TOKEN: token });
    const table = await run(['connections'], user);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/acme\s+\d{4}-\d\d-\d\dT\S+\s+upstream-alice/);
    const json = await run(['connections', '--json'], user);
    expect(JSON.parse(json.stdout).connections[0]).toMatchObject({ name: NAME, connected: true });
    const adminList = await run(['admin', 'connections', '--email', hana.email, '--json'], adminToken);
    expect(JSON.parse(adminList.stdout)).toMatchObject({
      email: hana.email,
      connections: [
        { name: NAME, connected: true },
        { name: 'acme-api', connected: false },
      ],
    });
    const off = await run(['connections', 'disconnect', NAME], user);
    expect(off.stdout.trim()).toBe('disconnected acme (revoked at the upstream)');
    expect(await storedRow(hana)).toBeUndefined();
    const again = await run(['admin', 'disconnect', '--email', hana.email, '--connection', NAME], adminToken);
    expect(again.code).toBe(0);
    expect(again.stdout.trim()).toBe(`${hana.email} had not connected acme`);
    for (const out of [table, json, adminList, off, again])
      for (const t of upstream.issuedTokens) expect(out.stdout + out.stderr).not.toContain(t);
    await home.cleanup();
  });

  it('a blocked user cannot start connecting', async () => {
    const ivan = await seedUser(db.pool);
    const { access_token } = await signIn(idp.issuer, admin.sessionToken, { scope: 'platform:admin' });
    expect(
      (await callAdminApi(idp.issuer, access_token, 'POST', '/admin/api/block', { email: ivan.email }))
        .status,
    ).toBe(200);
    const res = await fetch(`${idp.issuer}/connections/${NAME}`, {
      headers: { cookie: `${sessionCookieName(idp.issuer)}=${ivan.sessionToken}` },
      redirect: 'manual',
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('blocked');
  });

  it('no upstream token in any log line at trace level (the IdP process and the replicas)', () => {
    expect(upstream.issuedTokens.length).toBeGreaterThan(5);
    const lines = idp.output() + serviceLines;
    expect(lines).toContain('connection connected');
    expect(lines).toContain('connection refreshed');
    for (const t of upstream.issuedTokens) expect(lines).not.toContain(t);
  });
});
