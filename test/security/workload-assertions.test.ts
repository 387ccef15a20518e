// Attack (issue 22, workload identity): a CI job or a Kubernetes pod presents its platform's OIDC token instead of
// a stored key. Real IdP, gateway, tool servers and `platform admin`, a stand-in workload issuer (a local key
// set): an assertion from a trusted `workload` issuer whose `sub` is a machine client's workload subject gets that
// client's token and calls whoami through the gateway; an untrusted issuer, a wrong audience, a reused jti, an
// unregistered subject, a foreign key and an expired assertion are refused; revoke-client cuts it within 1 s.
// PLATFORM_TRUSTED_ISSUERS_FILE: a malformed file stops start-up with one line; SIGHUP reloads, keeping the old
// list when the new one is bad.

import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPlatform } from '../cli/support.ts';
import { type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { seedUser } from '../helpers/database.ts';
import { gatewayStatus, newMachineKey } from '../helpers/machine-clients.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const CI = 'https://ci.stand-in.test';
const OTHER = 'https://other.stand-in.test';
const ADMIN = `wl-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;

/** A stand-in workload issuer: its keys served at /<name>/jwks on a local server, and tokens signed with them. */
async function standIn(kid: string) {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return {
    jwk,
    sign(claims: { iss: string; sub: string; aud: string; jti?: string; exp?: number }) {
      return new SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' })
        .setIssuer(claims.iss)
        .setSubject(claims.sub)
        .setAudience(claims.aud)
        .setJti(claims.jti ?? crypto.randomUUID())
        .setIssuedAt()
        .setExpirationTime(claims.exp ?? Math.floor(Date.now() / 1000) + 300)
        .sign(privateKey);
    },
  };
}

let r: ReplayStack;
let keys: Server;
let keysOrigin: string;
let adminToken: string;
let ciEmail: string;
let ci: Awaited<ReturnType<typeof standIn>>;
let other: Awaited<ReturnType<typeof standIn>>;
const issuersFile = join(tmpdir(), `trusted-issuers-${crypto.randomUUID()}.yaml`);

const fileFor = (issuers: Array<{ issuer: string; path: string }>) =>
  `issuers:\n${issuers
    .map((i) => `  - issuer: ${i.issuer}\n    jwks_uri: ${keysOrigin}${i.path}\n    kind: workload\n`)
    .join('')}`;

beforeAll(async () => {
  ci = await standIn('ci-1');
  other = await standIn('other-1');
  keys = createServer((req, res) => {
    const jwk = req.url === '/ci/jwks' ? ci.jwk : req.url === '/other/jwks' ? other.jwk : undefined;
    if (!jwk) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => keys.listen(0, '127.0.0.1', resolve));
  keysOrigin = `http://127.0.0.1:${(keys.address() as { port: number }).port}`;
  await writeFile(issuersFile, fileFor([{ issuer: CI, path: '/ci/jwks' }]));
  r = await startReplayStack({
    idpEnv: { PLATFORM_ADMIN_EMAILS: ADMIN, PLATFORM_TRUSTED_ISSUERS_FILE: issuersFile },
  });
  const admin = await seedUser(r.stack.db.pool, { email: ADMIN });
  adminToken = (await signIn(r.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  ciEmail = (await seedUser(r.stack.db.pool, { email: `wl-${crypto.randomUUID().slice(0, 8)}@example.com` }))
    .email;
}, 90_000);

afterAll(async () => {
  await r?.stop();
  await new Promise((resolve) => keys?.close(resolve));
});

async function addWorkloadClient(issuer: string, subject: string): Promise<string> {
  const key = await newMachineKey();
  const out = await runPlatform(
    [
      'admin',
      'clients',
      'add',
      '--name',
      'deploy job',
      '--jwks-file',
      key.jwksFile,
      '--email',
      ciEmail,
      '--service',
      'platform',
      '--workload-issuer',
      issuer,
      '--workload-subject',
      subject,
      '--issuer',
      r.issuer,
      '--token',
      adminToken,
    ],
    { HOME: '/nonexistent' },
  );
  expect(out.stderr).toBe('');
  return out.stdout.trim();
}

const exchange = (assertion: string) => postForm(`${r.issuer}/oauth/token`, { grant_type: GRANT, assertion });

describe('workload assertions (jwt-bearer from a trusted workload issuer)', () => {
  it('discovery lists the jwt-bearer grant', async () => {
    const meta = (await (await fetch(`${r.issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: string[];
    };
    expect(meta.grant_types_supported).toContain(GRANT);
  });

  it("a trusted issuer's token for the client's subject gets its machine token; whoami through the gateway", async () => {
    const sub = `repo:acme/app:ref:refs/heads/${crypto.randomUUID()}`;
    const clientId = await addWorkloadClient(CI, sub);
    const t = await exchange(await ci.sign({ iss: CI, sub, aud: r.issuer }));
    expect(t.status, t.text).toBe(200);
    expect(t.json.refresh_token).toBeUndefined();
    expect(t.json.scope).toBe('mcp:platform');
    const me = await r.whoami(String(t.json.access_token));
    expect(me).toMatchObject({ email: ciEmail, sub: clientId, client_id: clientId });
    const audit = await fetch(`${r.issuer}/admin/api/audit?client_id=${clientId}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    const items = ((await audit.json()) as { items: Array<Record<string, unknown>> }).items;
    expect(items.filter((i) => i.event === 'issued').map((i) => i.grant_type)).toEqual([GRANT]);
  });

  it('refused with invalid_grant: untrusted issuer, wrong audience, reused jti, unknown subject, foreign key, expired', async () => {
    const sub = `system:serviceaccount:jobs:${crypto.randomUUID()}`;
    await addWorkloadClient(CI, sub);
    const jti = crypto.randomUUID();
    expect((await exchange(await ci.sign({ iss: CI, sub, aud: r.issuer, jti }))).status).toBe(200);
    const cases = {
      reused: await ci.sign({ iss: CI, sub, aud: r.issuer, jti }),
      untrusted: await other.sign({ iss: OTHER, sub, aud: r.issuer }),
      audience: await ci.sign({ iss: CI, sub, aud: 'https://elsewhere.example' }),
      subject: await ci.sign({ iss: CI, sub: 'system:serviceaccount:jobs:nobody', aud: r.issuer }),
      // The CI issuer's name, another key (unknown kid: one refetch, still not there).
      foreign: await other.sign({ iss: CI, sub, aud: r.issuer }),
      expired: await ci.sign({ iss: CI, sub, aud: r.issuer, exp: Math.floor(Date.now() / 1000) - 120 }),
    };
    for (const [name, assertion] of Object.entries(cases)) {
      const res = await exchange(assertion);
      expect({ name, status: res.status, error: res.json.error }).toEqual({
        name,
        status: 400,
        error: 'invalid_grant',
      });
    }
  });

  it('revoke-client: the live token is cut at the gateway within 1 s; new assertions get 401 invalid_client', async () => {
    const sub = `repo:acme/app:environment:${crypto.randomUUID()}`;
    const clientId = await addWorkloadClient(CI, sub);
    const token = String((await exchange(await ci.sign({ iss: CI, sub, aud: r.issuer }))).json.access_token);
    expect((await r.whoami(token)).sub).toBe(clientId);
    const out = await runPlatform(
      ['admin', 'revoke-client', '--client-id', clientId, '--issuer', r.issuer, '--token', adminToken],
      { HOME: '/nonexistent' },
    );
    expect(out.code).toBe(0);
    const gateway = () => gatewayStatus(r.serverUrl('platform'), token);
    await expect.poll(gateway, { timeout: 1000, interval: 50 }).toBe(401);
    const again = await exchange(await ci.sign({ iss: CI, sub, aud: r.issuer }));
    expect(again.status).toBe(401);
    expect(again.json.error).toBe('invalid_client');
  });

  it('SIGHUP reloads the file; a bad file is refused and the old list stays', async () => {
    const sub = `other:${crypto.randomUUID()}`;
    await addWorkloadClient(OTHER, sub);
    expect((await exchange(await other.sign({ iss: OTHER, sub, aud: r.issuer }))).json.error).toBe(
      'invalid_grant',
    );
    await writeFile(issuersFile, 'issuers:\n  - issuer: x\n    kind: nope\n');
    r.stack.idp.child.kill('SIGHUP');
    await r.stack.idp.waitFor(/trusted issuers not reloaded.*issuers\[0\]/);
    const ciSub = `repo:acme/app:ref:${crypto.randomUUID()}`;
    await addWorkloadClient(CI, ciSub);
    expect((await exchange(await ci.sign({ iss: CI, sub: ciSub, aud: r.issuer }))).status).toBe(200);
    await writeFile(
      issuersFile,
      fileFor([
        { issuer: CI, path: '/ci/jwks' },
        { issuer: OTHER, path: '/other/jwks' },
      ]),
    );
    r.stack.idp.child.kill('SIGHUP');
    await r.stack.idp.waitFor(/trusted issuers reloaded/);
    expect((await exchange(await other.sign({ iss: OTHER, sub, aud: r.issuer }))).status).toBe(200);
  });

  it('a malformed file stops start-up with one line naming the problem', async () => {
    const bad = join(tmpdir(), `trusted-issuers-bad-${crypto.randomUUID()}.yaml`);
    await writeFile(
      bad,
      `issuers:\n  - issuer: ${CI}\n    jwks_uri: http://keys.example/jwks\n    kind: workload\n`,
    );
    const p = startPlatform(['idp'], {
      IDP_PORT: '0',
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: 'postgresql://127.0.0.1:1/none',
      REDIS_URL: 'redis://127.0.0.1:1',
      PLATFORM_TRUSTED_ISSUERS_FILE: bad,
    });
    const code = await p.exited;
    expect(code).not.toBe(0);
    const lines = p.output().trim().split('\n');
    expect(lines, p.output()).toHaveLength(1);
    expect(lines[0]).toMatch(
      /PLATFORM_TRUSTED_ISSUERS_FILE: issuer 1 \(issuers\[0\], line 2\): jwks_uri: must be an https URL/,
    );
  });
});
