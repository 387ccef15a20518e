// `platform admin` as an administrator runs it: the real CLI against a real `platform idp` over its admin API
// (no database or Redis access from the CLI), and the admin API's own answers where the CLI hides them.
import { Redis } from 'ioredis';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { registerClient } from '../helpers/clients.ts';
import { createTestDatabase, type SeededUser, seedUser, type TestDatabase } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { type IdpProcess, startIdpProcess } from '../helpers/processes.ts';
import { runPlatform, tempConfigHome } from './support.ts';

let db: TestDatabase;
let idp: IdpProcess;
let redis: Redis;
let root: SeededUser;
let adminToken: string;
let home: Awaited<ReturnType<typeof tempConfigHome>>;

beforeAll(async () => {
  [db, home] = await Promise.all([createTestDatabase(), tempConfigHome()]);
  root = await seedUser(db.pool);
  idp = await startIdpProcess({
    databaseUrl: db.url,
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ADMIN_EMAILS: root.email },
  });
  redis = new Redis(inject('redisUrl'));
  adminToken = (await signIn(idp.issuer, root.sessionToken, { scope: 'openid email platform:admin' }))
    .access_token;
});
afterAll(async () => {
  redis?.disconnect();
  await idp?.stop();
  await db?.drop();
  await home?.cleanup();
});

/** `platform admin <args>` with the administrator's token, as a script would run it. */
const admin = (args: string[], token = adminToken) =>
  runPlatform(['admin', ...args], { HOME: home.dir, PLATFORM_ISSUER: idp.issuer, PLATFORM_TOKEN: token });

const api = async (path: string, init: RequestInit = {}, token = adminToken) => {
  const res = await fetch(`${idp.issuer}/admin/api/${path}`, {
    ...init,
    headers: { authorization: `Bearer ${token}`, ...init.headers },
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
};

describe('platform admin revoke-user and revoke-token', () => {
  it('revoke-user revokes every sign-in and sets the cut-offs, published on the channel', async () => {
    const user = await seedUser(db.pool, { email: 'Bob@Example.com' });
    const a = await signIn(idp.issuer, user.sessionToken);
    const b = await signIn(idp.issuer, user.sessionToken);
    const bystander = await seedUser(db.pool);
    const c = await signIn(idp.issuer, bystander.sessionToken);

    const sub = new Redis(inject('redisUrl'));
    const seen: string[] = [];
    await sub.subscribe('platform:revocations');
    sub.on('message', (_ch, m) => seen.push(m));
    try {
      const before = Math.floor(Date.now() / 1000);
      const r = await admin(['revoke-user', '--email', 'BOB@example.com']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const cutoff = Number(await redis.get(`platform:deny:sub:${user.sub}`));
      expect(cutoff).toBeGreaterThanOrEqual(before);
      expect(cutoff).toBeGreaterThanOrEqual(decodeJwt(b.access_token).iat!);
      expect(r.stdout).toBe(
        `revoked bob@example.com: tokens issued at or before ${new Date(cutoff * 1000).toISOString()} are refused; ` +
          `2 sign-in(s) and 0 authorization code(s) revoked (sub ${user.sub})\n`,
      );
      expect(await redis.get('platform:deny:email:bob@example.com')).toBe(String(cutoff));
      await expect.poll(() => seen.map((m) => JSON.parse(m))).toContainEqual({ sub: user.sub, cutoff });
    } finally {
      sub.disconnect();
    }
    expect((await refresh(idp.issuer, a.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(idp.issuer, b.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(idp.issuer, c.refresh_token)).status).toBe(200);
  });

  it('revoke-token puts the jti on the denylist until the token expires; --json prints the answer', async () => {
    const user = await seedUser(db.pool);
    const t = await signIn(idp.issuer, user.sessionToken);
    const { jti, exp } = decodeJwt(t.access_token);
    const r = await admin(['revoke-token', '--jti', String(jti).toUpperCase(), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      jti,
      known: true,
      revoked: true,
      expires_at: new Date(exp! * 1000).toISOString(),
    });
    expect(await redis.get(`platform:deny:jti:${jti}`)).toBe('1');
    const unknown = await admin(['revoke-token', '--jti', 'not-issued-here']);
    expect(unknown.stdout).toMatch(
      /^revoked jti not-issued-here until \S+ \(no token with this id was issued here; it is denied anyway\)\n$/,
    );
  });
});

describe('platform admin audit', () => {
  let carol: SeededUser;
  let clientId: string;
  beforeAll(async () => {
    carol = await seedUser(db.pool, { email: 'carol@example.com' });
    const first = await signIn(idp.issuer, carol.sessionToken, { scope: 'openid mcp:mail' });
    await refresh(idp.issuer, first.refresh_token);
    const reg = await registerClient(idp.issuer, {
      client_name: 'Audit Probe',
      redirect_uris: ['http://127.0.0.1:40111/callback'],
    });
    clientId = reg.json.client_id;
    await signIn(idp.issuer, carol.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40111/callback',
      scope: 'openid mcp:deals',
    });
  });

  it('lists issuances newest first, filtered by email, client, service and time', async () => {
    const all = await admin(['audit', '--email', 'Carol@Example.com', '--json']);
    expect(all.code, all.stderr).toBe(0);
    const rows = JSON.parse(all.stdout) as Array<Record<string, string>>;
    expect(rows.map((x) => [x.event, x.grant_type, x.client_id, x.scope])).toEqual([
      ['issued', 'authorization_code', clientId, 'openid mcp:deals'],
      ['issued', 'refresh_token', 'platform-cli', 'openid mcp:mail'],
      ['issued', 'authorization_code', 'platform-cli', 'openid mcp:mail'],
    ]);
    expect(rows.every((x) => x.email === 'carol@example.com')).toBe(true);

    const byClient = JSON.parse((await admin(['audit', '--client', clientId, '--json'])).stdout);
    expect(byClient.map((x: { client_id: string }) => x.client_id)).toEqual([clientId]);
    const byService = JSON.parse(
      (await admin(['audit', '--email', 'carol@example.com', '--service', 'mail', '--json'])).stdout,
    );
    expect(byService).toHaveLength(2);
    const future = JSON.parse((await admin(['audit', '--since', '2999-01-01', '--json'])).stdout);
    expect(future).toEqual([]);
    const recent = JSON.parse(
      (await admin(['audit', '--email', 'carol@example.com', '--since', '1h', '--limit', '2', '--json']))
        .stdout,
    );
    expect(recent.map((x: { id: string }) => x.id)).toEqual(rows.slice(0, 2).map((x) => x.id));

    const table = await admin(['audit', '--email', 'carol@example.com']);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^time\s+event\s+email\s+client\s+jti \/ target\s+scope$/);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toContain(clientId);
  });

  it('pages with a cursor that stays stable while rows arrive', async () => {
    const first = JSON.parse((await api('audit?email=carol@example.com&limit=2')).text);
    expect(first.items).toHaveLength(2);
    expect(typeof first.next_cursor).toBe('string');
    await signIn(idp.issuer, carol.sessionToken, { scope: 'openid' }); // a newer row must not shift the pages
    const second = JSON.parse(
      (await api(`audit?email=carol@example.com&limit=2&cursor=${first.next_cursor}`)).text,
    );
    expect(second.items.map((x: { grant_type: string }) => x.grant_type)).toEqual(['authorization_code']);
    expect(second.next_cursor).toBeNull();
    const ids = [...first.items, ...second.items].map((x: { id: string }) => x.id);
    expect(new Set(ids).size).toBe(3);
  });

  it('exports everything as JSON lines and CSV, streamed', async () => {
    const jsonl = await admin(['audit', '--email', 'carol@example.com', '--format', 'jsonl']);
    expect(jsonl.code, jsonl.stderr).toBe(0);
    const lines = jsonl.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4);
    expect(lines.every((l) => l.email === 'carol@example.com')).toBe(true);

    const csv = await api('audit.csv?email=carol@example.com');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = csv.text.trimEnd().split('\r\n');
    expect(rows[0]).toBe(
      'id,at,event,email,subject,client_id,grant_type,jti,scope,expires_at,target,detail,request_id',
    );
    expect(rows).toHaveLength(5);
    expect(
      (
        await admin(['audit', '--email', 'carol@example.com', '--format', 'csv', '--limit', '1'])
      ).stdout.split('\r\n'),
    ).toHaveLength(3);
  });

  it('an export larger than one read batch arrives whole, in order, rows of the same instant included', async () => {
    // 2500 issuances at one and the same instant: only the (time, record, id) position keeps batches apart.
    await db.pool.query(
      `INSERT INTO platform.issuance_audit (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at)
       SELECT '2026-01-01T00:00:00Z', gen_random_uuid(), 'refresh_token', 'u', 'bulk-sub', 'bulk@example.com',
              'platform-cli', 'openid', '2026-01-01T01:00:00Z'
         FROM generate_series(1, 2500)`,
    );
    const r = await admin(['audit', '--email', 'bulk@example.com', '--format', 'jsonl']);
    expect(r.code, r.stderr).toBe(0);
    const ids = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => Number((JSON.parse(l) as { id: string }).id.split(':')[1]));
    expect(ids).toHaveLength(2500);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(new Set(ids).size).toBe(2500);
    const paged = JSON.parse(
      (await admin(['audit', '--email', 'bulk@example.com', '--limit', '1200', '--json'])).stdout,
    );
    expect(paged.map((x: { id: string }) => Number(x.id.split(':')[1]))).toEqual(ids.slice(0, 1200));
  });

  it('a cell a spreadsheet would run as a formula is defused in the CSV', async () => {
    const user = await seedUser(db.pool, { email: '=cmd@example.com' });
    await signIn(idp.issuer, user.sessionToken, { scope: 'openid' });
    const csv = await api(`audit.csv?email=${encodeURIComponent('=cmd@example.com')}`);
    expect(csv.text.split('\r\n')[1]).toContain(",'=cmd@example.com,");
  });

  it('refuses unknown or malformed filters with invalid_request', async () => {
    for (const q of [
      'emial=x',
      'limit=0',
      'limit=501',
      'since=yesterday',
      'service=Mail',
      'cursor=abc',
      'email=a&email=b',
    ]) {
      const r = await api(`audit?${q}`);
      expect(r.status, q).toBe(400);
      expect(JSON.parse(r.text).error).toBe('invalid_request');
    }
  });

  it('writes every administrative action to the audit, with who did it', async () => {
    const user = await seedUser(db.pool);
    const { jti } = decodeJwt((await signIn(idp.issuer, user.sessionToken)).access_token);
    await admin(['revoke-token', '--jti', String(jti)]);
    const mine = JSON.parse((await admin(['audit', '--email', root.email, '--json'])).stdout) as Array<
      Record<string, unknown>
    >;
    const action = mine.find((x) => x.event === 'revoke-token' && x.target === jti);
    expect(action).toMatchObject({ email: root.email, subject: root.sub, client_id: 'platform-cli' });
    expect(mine.some((x) => x.event === 'read-audit')).toBe(true);
  });
});

describe('platform admin user, sign-ins and consents', () => {
  let dana: SeededUser;
  let clientId: string;
  beforeAll(async () => {
    dana = await seedUser(db.pool, { email: 'dana@example.com' });
    const reg = await registerClient(idp.issuer, {
      client_name: 'Consent Probe',
      redirect_uris: ['http://127.0.0.1:40222/callback'],
    });
    clientId = reg.json.client_id;
  });

  it('user lists subjects, sign-ins and consents; revoke-sign-in ends one sign-in only', async () => {
    const cli = await signIn(idp.issuer, dana.sessionToken);
    const other = await signIn(idp.issuer, dana.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40222/callback',
      scope: 'openid mcp:mail mcp:deals',
    });
    await refresh(idp.issuer, cli.refresh_token).then((r) => {
      cli.refresh_token = r.json.refresh_token as string;
    });
    const u = JSON.parse((await admin(['user', '--email', 'Dana@Example.com', '--json'])).stdout);
    expect(u.email).toBe('dana@example.com');
    expect(u.subjects).toEqual([dana.sub]);
    expect(u.sign_ins).toHaveLength(2);
    const cliSignIn = u.sign_ins.find((s: { client_id: string }) => s.client_id === 'platform-cli');
    expect(Date.parse(cliSignIn.last_used_at)).toBeGreaterThan(Date.parse(cliSignIn.created_at));
    expect(u.consents).toEqual([
      {
        client_id: clientId,
        client_name: 'Consent Probe',
        services: ['deals', 'mail'],
        granted_at: expect.any(String),
      },
    ]);

    const table = await admin(['sign-ins', '--email', 'dana@example.com']);
    expect(table.stdout).toContain(cliSignIn.id);
    expect(table.stdout).toContain('Consent Probe');

    const r = await admin(['revoke-sign-in', '--id', cliSignIn.id]);
    expect(r).toEqual({ code: 0, stdout: `revoked sign-in ${cliSignIn.id}\n`, stderr: '' });
    expect((await refresh(idp.issuer, cli.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(idp.issuer, other.refresh_token, clientId)).status).toBe(200);
    const after = JSON.parse((await admin(['user', '--email', 'dana@example.com', '--json'])).stdout);
    expect(after.sign_ins.map((s: { client_id: string }) => s.client_id)).toEqual([clientId]);
  });

  it('withdraw-consent: the client must ask again, and its sign-ins end', async () => {
    const s = await signIn(idp.issuer, dana.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40222/callback',
      scope: 'openid mcp:mail',
    });
    const consents = await admin(['consents', '--email', 'dana@example.com']);
    expect(consents.stdout).toMatch(/Consent Probe\s+deals mail/);
    const r = await admin(['withdraw-consent', '--email', 'dana@example.com', '--client', clientId]);
    expect(r).toEqual({
      code: 0,
      stdout: `withdrew the consent of dana@example.com to ${clientId}\n`,
      stderr: '',
    });
    expect((await refresh(idp.issuer, s.refresh_token, clientId)).json.error).toBe('invalid_grant');
    expect(JSON.parse((await admin(['consents', '--email', 'dana@example.com', '--json'])).stdout)).toEqual(
      [],
    );
    // The next authorization shows the consent page again instead of a code.
    const page = await fetch(
      `${idp.issuer}/oauth/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: 'http://127.0.0.1:40222/callback',
        scope: 'openid mcp:mail',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
        state: 's',
      })}`,
      { redirect: 'manual', headers: { cookie: `authjs.session-token=${dana.sessionToken}` } },
    );
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Consent Probe');
    const again = await admin(['withdraw-consent', '--email', 'dana@example.com', '--client', clientId]);
    expect(again).toEqual({
      code: 1,
      stdout: '',
      stderr: `platform: dana@example.com has no consent to ${clientId}\n`,
    });
  });

  it('unknown users and sign-ins are 404 not_found, one line from the CLI', async () => {
    expect(await admin(['user', '--email', 'nobody@example.com'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'platform: no user with the email nobody@example.com\n',
    });
    const id = crypto.randomUUID();
    expect((await admin(['revoke-sign-in', '--id', id])).stderr).toBe(
      `platform: no sign-in with the id ${id}\n`,
    );
    const bad = await api('sign-ins/not-a-uuid', { method: 'DELETE' });
    expect(bad.status).toBe(400);
  });
});

describe('platform admin clients and keys', () => {
  it('clients lists the built-in CLI and registered clients with their consent counts', async () => {
    const r = await admin(['clients', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const items = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
    expect(items.find((c) => c.client_id === 'platform-cli')).toMatchObject({
      kind: 'builtin',
      client_name: 'platform command-line client',
    });
    const probe = items.find((c) => c.client_name === 'Audit Probe');
    expect(probe).toMatchObject({
      kind: 'registered',
      redirect_uris: ['http://127.0.0.1:40111/callback'],
      consents: 1,
    });
    expect((await admin(['clients'])).stdout).toMatch(
      /^client\s+kind\s+name\s+consents\s+created\s+redirect URIs\n/,
    );
  });

  it('keys lists the published key, which signs, and since when', async () => {
    const jwks = (await (await fetch(`${idp.issuer}/.well-known/jwks.json`)).json()) as {
      keys: Array<{ kid: string }>;
    };
    const r = await admin(['keys', '--json']);
    expect(JSON.parse(r.stdout)).toEqual([
      { kid: jwks.keys[0]!.kid, alg: 'RS256', published_since: expect.any(String), signing: true },
    ]);
    expect(Date.parse(JSON.parse(r.stdout)[0].published_since)).toBeLessThanOrEqual(Date.now());
  });
});

describe('who may use it', () => {
  it('a user who is not an administrator is told how one becomes one', async () => {
    const plain = await seedUser(db.pool);
    const t = await signIn(idp.issuer, plain.sessionToken, { scope: 'openid email platform:admin' });
    expect(t.scope.split(' ')).not.toContain('platform:admin');
    const r = await admin(['keys'], t.access_token);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^platform: not allowed \(insufficient_scope: the token lacks scope platform:admin\)\n$/,
    );
  });

  it('a stored login without platform:admin says what to do', async () => {
    const plain = await seedUser(db.pool);
    const t = await signIn(idp.issuer, plain.sessionToken);
    const creds = await tempConfigHome();
    try {
      const { mkdir, writeFile } = await import('node:fs/promises');
      await mkdir(`${creds.dir}/platform`, { recursive: true });
      await writeFile(
        creds.credentials,
        JSON.stringify({
          issuer: idp.issuer,
          client_id: 'platform-cli',
          access_token: t.access_token,
          refresh_token: t.refresh_token,
          expires_at: Math.floor(Date.now() / 1000) + 3000,
          scope: t.scope,
        }),
      );
      // No PLATFORM_ISSUER: the stored login's issuer is the IdP to ask.
      const r = await runPlatform(['admin', 'keys'], { XDG_CONFIG_HOME: creds.dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        "platform: not allowed (insufficient_scope: the token lacks scope platform:admin); the stored login was not granted platform:admin: an administrator is a user whose email is in the IdP's PLATFORM_ADMIN_EMAILS, who then runs `platform login` again\n",
      );
    } finally {
      await creds.cleanup();
    }
  });

  it('a bad or revoked token is refused with invalid_token', async () => {
    const r = await admin(['keys'], 'not-a-token');
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'platform: the IdP refused the token (invalid_token: the access token is invalid or expired); run `platform login`\n',
    });
  });
});
