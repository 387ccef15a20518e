// The trial deployment's two commands, run for real: `platform trial-env` writes a deploy/.env of fresh secrets
// for a loopback trial, and `platform trial-sign-in` (the `trial` profile's sign-in page) creates the web
// application's tables in `public` and signs anyone in — so it refuses to run for an issuer other machines reach.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isExampleSecret } from '../../lib/example-secrets.ts';
import { deriveIdentityKey } from '../../lib/identity.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort, type RunningProcess, startPlatform } from '../helpers/processes.ts';
import { runPlatform } from './support.ts';

const parseEnv = (text: string) =>
  new Map(
    text
      .split('\n')
      .map((l) => /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(l))
      .filter((m) => m !== null)
      .map((m) => [m[1]!, m[2]!] as const),
  );

describe('platform trial-env', () => {
  it('prints a loopback trial with the trial profile and fresh secrets of its own, none an example', async () => {
    const [a, b] = await Promise.all([
      runPlatform(['trial-env', '--port', '18123'], {}),
      runPlatform(['trial-env'], {}),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/NOT FOR PRODUCTION/);
    const env = parseEnv(a.stdout);
    expect(env.get('COMPOSE_PROFILES')).toBe('trial');
    expect(env.get('COMPOSE_FILE')).toBe('compose.yaml:compose.postgres.yaml');
    expect(env.get('TRIAL_SIGN_IN_UPSTREAM')).toBe('signin:3000');
    for (const k of ['PUBLIC_BASE_URL', 'PLATFORM_OIDC_ISSUER', 'PLATFORM_AUDIENCE'])
      expect(env.get(k)).toBe('http://localhost:18123');
    expect(parseEnv(b.stdout).get('PROXY_HOST_PORT')).toBe('8080');
    const secrets = [...env].filter(([k]) => /PASSWORD|SECRET|_KEY$/.test(k));
    expect(secrets.length).toBe(12);
    for (const [k, v] of secrets) {
      expect(isExampleSecret(v), k).toBe(false);
      // Generated per run: the other run has another value.
      expect(parseEnv(b.stdout).get(k), k).not.toBe(v);
    }
    const secret = env.get('GATEWAY_IDENTITY_SECRET')!;
    for (const s of ['platform', 'mail', 'deals'])
      expect(env.get(`${s.toUpperCase()}_TOOL_IDENTITY_KEY`)).toBe(deriveIdentityKey(secret, s));
    expect(JSON.parse(env.get('PLATFORM_OIDC_PRIVATE_KEY')!)).toMatchObject({ kty: 'RSA', alg: 'RS256' });
  });

  it('says when the port is in use (make dev holds 8080) and what to do, and still prints the .env', async () => {
    const held = createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const port = (held.address() as { port: number }).port;
    try {
      const r = await runPlatform(['trial-env', '--port', String(port)], {});
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`PUBLIC_BASE_URL=http://localhost:${port}`);
      expect(r.stderr).toBe(
        `platform: port ${port} on 127.0.0.1 is in use now (\`make dev\`'s gateway listens on 8080): stop it before ` +
          `\`docker compose up\`, or write the .env with \`trial-env --port 8090\` and use http://localhost:8090 in the commands that follow\n`,
      );
    } finally {
      held.close();
    }
    const free = await runPlatform(['trial-env', '--port', String(port)], {});
    expect(free.stderr).toBe('');
  });

  it('refuses a bad --port with a usage error', async () => {
    const r = await runPlatform(['trial-env', '--port', 'eighty'], {});
    expect(r).toMatchObject({
      code: 2,
      stderr: 'platform: configuration error: --port: must be a port number, got "eighty"\n',
    });
  });
});

describe('platform trial-sign-in', () => {
  let db: TestDatabase;
  let signIn: RunningProcess | undefined;
  let port: number;
  beforeAll(async () => {
    // Migrated but without the web application's tables, as the trial's Postgres is when it starts.
    db = await createTestDatabase({ authjs: false });
    port = await freePort();
  });
  afterAll(async () => {
    await signIn?.stop();
    await db?.drop();
  });

  it('refuses to run for an issuer that is not loopback http: anyone could sign in as anyone', async () => {
    for (const issuer of ['https://app.example.com', 'http://app.example.com', 'https://localhost:8080']) {
      const r = await runPlatform(['trial-sign-in'], { PLATFORM_OIDC_ISSUER: issuer, DATABASE_URL: db.url });
      expect(r.code, issuer).toBe(2);
      expect(r.stderr).toMatch(
        /^platform: configuration error: PLATFORM_OIDC_ISSUER: is \S+: the trial sign-in .* runs only for a loopback http issuer/,
      );
    }
  });

  it('creates the web application tables in public and signs an email in with the IdP cookie', async () => {
    const issuer = `http://localhost:${port}`;
    signIn = startPlatform(['trial-sign-in'], {
      PLATFORM_OIDC_ISSUER: issuer,
      DATABASE_URL: db.url,
      TRIAL_SIGN_IN_PORT: String(port),
    });
    await signIn.waitFor(/trial sign-in listening/, 20_000);
    const { rows } = await db.pool.query<{ t: string }>(
      "SELECT table_schema || '.' || table_name AS t FROM information_schema.tables WHERE table_name IN ('users', 'accounts', 'sessions') ORDER BY 1",
    );
    expect(rows.map((r) => r.t)).toEqual(['public.accounts', 'public.sessions', 'public.users']);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    const page = await fetch(`http://127.0.0.1:${port}/api/auth/signin`);
    expect(await page.text()).toContain('trial@example.com');
    const r = await fetch(`http://127.0.0.1:${port}/api/auth/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: issuer },
      body: new URLSearchParams({ email: 'Tess@Example.com', callbackUrl: `${issuer}/oauth/authorize?x=1` }),
    });
    expect(r.status).toBe(302);
    expect(r.headers.get('location')).toBe(`${issuer}/oauth/authorize?x=1`);
    const token = /^authjs\.session-token=([^;]+);/.exec(r.headers.get('set-cookie') ?? '')?.[1];
    expect(token).toBeDefined();
    const s = await db.pool.query(
      'SELECT u.email FROM sessions s JOIN users u ON u.id = s."userId" WHERE s."sessionToken" = $1',
      [token],
    );
    expect(s.rows).toEqual([{ email: 'tess@example.com' }]);
  });
});
