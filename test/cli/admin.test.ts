// `platform admin` revocation, users, sign-ins, consents, clients and keys, as an administrator runs them: the
// real CLI against a real `platform idp` over its admin API, and the API's own answers where the CLI hides them.
import { Redis } from 'ioredis';
import { decodeJwt } from 'jose';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { registerClient } from '../helpers/clients.ts';
import { type SeededUser, seedUser } from '../helpers/database.ts';
import { refresh, signIn } from '../helpers/oauth.ts';
import { adminStack } from './admin-support.ts';
import { runPlatform, tempConfigHome } from './support.ts';

const st = adminStack();

describe('platform admin revoke-user and revoke-token', () => {
  it('revoke-user revokes every sign-in and sets the cut-offs, published on the channel', async () => {
    const user = await seedUser(st.db.pool, { email: 'Bob@Example.com' });
    const a = await signIn(st.idp.issuer, user.sessionToken);
    const b = await signIn(st.idp.issuer, user.sessionToken);
    const bystander = await seedUser(st.db.pool);
    const c = await signIn(st.idp.issuer, bystander.sessionToken);

    const sub = new Redis(inject('redisUrl'));
    const seen: string[] = [];
    await sub.subscribe('platform:revocations');
    sub.on('message', (_ch, m) => seen.push(m));
    try {
      const before = Math.floor(Date.now() / 1000);
      const r = await st.admin(['revoke-user', '--email', 'BOB@example.com']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const cutoff = Number(await st.redis.get(`platform:deny:sub:${user.sub}`));
      expect(cutoff).toBeGreaterThanOrEqual(before);
      expect(cutoff).toBeGreaterThanOrEqual(decodeJwt(b.access_token).iat!);
      expect(r.stdout).toBe(
        `revoked bob@example.com: tokens issued at or before ${new Date(cutoff * 1000).toISOString()} are refused; ` +
          `2 sign-in(s) and 0 authorization code(s) revoked (sub ${user.sub})\n`,
      );
      expect(await st.redis.get('platform:deny:email:bob@example.com')).toBe(String(cutoff));
      await expect.poll(() => seen.map((m) => JSON.parse(m))).toContainEqual({ sub: user.sub, cutoff });
    } finally {
      sub.disconnect();
    }
    expect((await refresh(st.idp.issuer, a.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(st.idp.issuer, b.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(st.idp.issuer, c.refresh_token)).status).toBe(200);
  });

  it('revoke-token puts the jti on the denylist until the token expires; --json prints the answer', async () => {
    const user = await seedUser(st.db.pool);
    const t = await signIn(st.idp.issuer, user.sessionToken);
    const { jti, exp } = decodeJwt(t.access_token);
    const r = await st.admin(['revoke-token', '--jti', String(jti).toUpperCase(), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      jti,
      known: true,
      revoked: true,
      expires_at: new Date(exp! * 1000).toISOString(),
      published: true,
    });
    expect(await st.redis.get(`platform:deny:jti:${jti}`)).toBe('1');
    const unknown = await st.admin(['revoke-token', '--jti', 'not-issued-here']);
    expect(unknown.stdout).toMatch(
      /^revoked jti not-issued-here until \S+ \(no token with this id was issued here; it is denied anyway\)\n$/,
    );
  });
});

describe('platform admin user, sign-ins and consents', () => {
  let dana: SeededUser;
  let clientId: string;
  beforeAll(async () => {
    dana = await seedUser(st.db.pool, { email: 'dana@example.com' });
    const reg = await registerClient(st.idp.issuer, {
      client_name: 'Consent Probe',
      redirect_uris: ['http://127.0.0.1:40222/callback'],
    });
    clientId = reg.json.client_id;
  });

  it('user lists subjects, sign-ins and consents; revoke-sign-in ends one sign-in only', async () => {
    const cli = await signIn(st.idp.issuer, dana.sessionToken);
    const other = await signIn(st.idp.issuer, dana.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40222/callback',
      scope: 'openid mcp:mail mcp:deals',
    });
    await refresh(st.idp.issuer, cli.refresh_token).then((r) => {
      cli.refresh_token = r.json.refresh_token as string;
    });
    const u = JSON.parse((await st.admin(['user', '--email', 'Dana@Example.com', '--json'])).stdout);
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
        scopes: [],
        granted_at: expect.any(String),
      },
    ]);

    const table = await st.admin(['sign-ins', '--email', 'dana@example.com']);
    expect(table.stdout).toContain(cliSignIn.id);
    expect(table.stdout).toContain('Consent Probe');

    const r = await st.admin(['revoke-sign-in', '--id', cliSignIn.id]);
    expect(r).toEqual({ code: 0, stdout: `revoked sign-in ${cliSignIn.id}\n`, stderr: '' });
    expect((await refresh(st.idp.issuer, cli.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(st.idp.issuer, other.refresh_token, clientId)).status).toBe(200);
    const after = JSON.parse((await st.admin(['user', '--email', 'dana@example.com', '--json'])).stdout);
    expect(after.sign_ins.map((s: { client_id: string }) => s.client_id)).toEqual([clientId]);
  });

  it('withdraw-consent: the client must ask again, and its sign-ins end', async () => {
    const s = await signIn(st.idp.issuer, dana.sessionToken, {
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40222/callback',
      scope: 'openid mcp:mail',
    });
    const consents = await st.admin(['consents', '--email', 'dana@example.com']);
    expect(consents.stdout).toMatch(/Consent Probe\s+deals mail/);
    const r = await st.admin(['withdraw-consent', '--email', 'dana@example.com', '--client', clientId]);
    expect(r).toEqual({
      code: 0,
      stdout: `withdrew the consent of dana@example.com to ${clientId}\n`,
      stderr: '',
    });
    expect((await refresh(st.idp.issuer, s.refresh_token, clientId)).json.error).toBe('invalid_grant');
    expect(
      JSON.parse((await st.admin(['consents', '--email', 'dana@example.com', '--json'])).stdout),
    ).toEqual([]);
    // The next authorization shows the consent page again instead of a code.
    const page = await fetch(
      `${st.idp.issuer}/oauth/authorize?${new URLSearchParams({
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
    const again = await st.admin(['withdraw-consent', '--email', 'dana@example.com', '--client', clientId]);
    expect(again).toEqual({
      code: 1,
      stdout: '',
      stderr: `platform: dana@example.com has no consent to ${clientId}\n`,
    });
  });

  it('unknown users and sign-ins are 404 not_found, one line from the CLI', async () => {
    expect(await st.admin(['user', '--email', 'nobody@example.com'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'platform: no user with the email nobody@example.com\n',
    });
    const id = crypto.randomUUID();
    expect((await st.admin(['revoke-sign-in', '--id', id])).stderr).toBe(
      `platform: no sign-in with the id ${id}\n`,
    );
    const bad = await st.api('sign-ins/not-a-uuid', { method: 'DELETE' });
    expect(bad.status).toBe(400);
  });
});

describe('platform admin clients and keys', () => {
  it('clients lists the built-in CLI and registered clients with their consent counts', async () => {
    const reg = await registerClient(st.idp.issuer, {
      client_name: 'Clients Probe',
      redirect_uris: ['http://127.0.0.1:40333/callback'],
    });
    for (const user of [await seedUser(st.db.pool), await seedUser(st.db.pool)]) {
      await signIn(st.idp.issuer, user.sessionToken, {
        client_id: reg.json.client_id,
        redirect_uri: 'http://127.0.0.1:40333/callback',
        scope: 'openid mcp:platform',
      });
    }
    const r = await st.admin(['clients', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const items = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
    expect(items.find((c) => c.client_id === 'platform-cli')).toMatchObject({
      kind: 'builtin',
      client_name: 'platform command-line client',
    });
    const probe = items.find((c) => c.client_id === reg.json.client_id);
    expect(probe).toMatchObject({
      kind: 'registered',
      client_name: 'Clients Probe',
      redirect_uris: ['http://127.0.0.1:40333/callback'],
      consents: 2,
    });
    expect((await st.admin(['clients'])).stdout).toMatch(
      /^client\s+kind\s+name\s+consents\s+created\s+redirect URIs\n/,
    );
  });

  it('keys lists the published key, which signs, and since when', async () => {
    const jwks = (await (await fetch(`${st.idp.issuer}/.well-known/jwks.json`)).json()) as {
      keys: Array<{ kid: string }>;
    };
    const r = await st.admin(['keys', '--json']);
    expect(JSON.parse(r.stdout)).toEqual([
      {
        kid: jwks.keys[0]!.kid,
        alg: 'RS256',
        state: 'current',
        signing: true,
        origin: 'configured',
        published_since: expect.any(String),
        activated_at: null,
        retired_at: null,
        unpublish_at: null,
        withdrawn_at: null,
      },
    ]);
    expect(Date.parse(JSON.parse(r.stdout)[0].published_since)).toBeLessThanOrEqual(Date.now());
  });

  it('keys rotate is refused with static keys, saying how to rotate them', async () => {
    const r = await st.admin(['keys', 'rotate']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/rotation_off.*PLATFORM_KEY_ROTATION is not auto/);
    const api = await st.api('keys/rotate', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"emergency":true}',
    });
    expect(api.status).toBe(409);
    expect(JSON.parse(api.text).error).toBe('rotation_off');
  });
});

describe('who may use it', () => {
  it('a user who is not an administrator is told how one becomes one', async () => {
    const plain = await seedUser(st.db.pool);
    const t = await signIn(st.idp.issuer, plain.sessionToken, { scope: 'openid email platform:admin' });
    expect(t.scope.split(' ')).not.toContain('platform:admin');
    const r = await st.admin(['keys'], t.access_token);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^platform: not allowed \(insufficient_scope: the token lacks scope platform:admin\)\n$/,
    );
  });

  it('a stored login without platform:admin says what to do', async () => {
    const plain = await seedUser(st.db.pool);
    const t = await signIn(st.idp.issuer, plain.sessionToken);
    const creds = await tempConfigHome();
    try {
      const { mkdir, writeFile } = await import('node:fs/promises');
      await mkdir(`${creds.dir}/platform`, { recursive: true });
      await writeFile(
        creds.credentials,
        JSON.stringify({
          issuer: st.idp.issuer,
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
        "platform: not allowed (insufficient_scope: the token lacks scope platform:admin); the stored login was not granted platform:admin: an administrator is a user whose email is in the IdP's PLATFORM_ADMIN_EMAILS, who then runs `platform login` again (in a browser: a `--device` login never carries it)\n",
      );
    } finally {
      await creds.cleanup();
    }
  });

  it('a bad or revoked token is refused with invalid_token', async () => {
    const r = await st.admin(['keys'], 'not-a-token');
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'platform: the IdP refused the token (invalid_token: the access token is invalid or expired); run `platform login`\n',
    });
  });
});
