// Attack (issue 22, machine clients): CI jobs used a human's pasted PLATFORM_TOKEN, which nobody could revoke
// without revoking the human. Real IdP, gateway, tool servers and `platform admin`: an administrator registers a
// machine client (its public keys, the email it acts as, its services); the SDK v2 PrivateKeyJwtProvider gets a
// client_credentials token and calls whoami through the gateway; a replayed assertion, another client's use of
// the grant, scopes beyond the client's and a revoked client are refused; revoke-client cuts live tokens at the
// gateway within 1 s and the token endpoint answers 401 invalid_client.
import { Client, PrivateKeyJwtProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPlatform } from '../cli/support.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { type ReplayStack, startReplayStack } from '../helpers/client-replay.ts';
import { seedUser } from '../helpers/database.ts';
import { newDpopKey } from '../helpers/dpop.ts';
import {
  gatewayStatus as gatewayStatusAt,
  type MachineKey,
  newMachineKey,
} from '../helpers/machine-clients.ts';
import { postForm, signIn } from '../helpers/oauth.ts';
import { toolJson } from '../tools/helpers.ts';

const ADMIN = `mc-admin-${crypto.randomUUID().slice(0, 8)}@example.com`;
let r: ReplayStack;
let adminToken: string;
let key: MachineKey;
let ciEmail: string;

beforeAll(async () => {
  r = await startReplayStack({ idpEnv: { PLATFORM_ADMIN_EMAILS: ADMIN } });
  const admin = await seedUser(r.stack.db.pool, { email: ADMIN });
  adminToken = (await signIn(r.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
  ciEmail = (await seedUser(r.stack.db.pool, { email: `ci-${crypto.randomUUID().slice(0, 8)}@example.com` }))
    .email;
  key = await newMachineKey();
}, 90_000);

afterAll(async () => {
  await r?.stop();
});

const admin = (args: string[]) =>
  runPlatform(['admin', ...args, '--issuer', r.issuer, '--token', adminToken], { HOME: '/nonexistent' });

async function addClient(services: string[], extra: string[] = []): Promise<string> {
  const out = await admin([
    'clients',
    'add',
    '--name',
    'nightly CI',
    '--jwks-file',
    key.jwksFile,
    '--email',
    ciEmail,
    ...services.flatMap((s) => ['--service', s]),
    '--json',
    ...extra,
  ]);
  expect(out.stderr).toBe('');
  expect(out.code).toBe(0);
  const { client_id } = JSON.parse(out.stdout) as { client_id: string };
  expect(client_id).toMatch(/^mc-/);
  return client_id;
}

const adminApi = (method: string, path: string, body?: unknown) =>
  callAdminApi(r.issuer, adminToken, method, path, body);

const gatewayStatus = (token: string) => gatewayStatusAt(r.serverUrl('platform'), token);

describe('machine clients: client_credentials with private_key_jwt', () => {
  it('discovery lists client_credentials', async () => {
    const meta = (await (await fetch(`${r.issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: string[];
    };
    expect(meta.grant_types_supported).toContain('client_credentials');
  });

  it('the SDK v2 PrivateKeyJwtProvider gets a machine token and calls whoami through the gateway', async () => {
    const clientId = await addClient(['platform', 'mail']);
    const provider = new PrivateKeyJwtProvider({
      clientId,
      privateKey: key.privateJwk as Record<string, unknown>,
      algorithm: 'ES256',
      expectedIssuer: r.issuer,
    });
    const transport = new StreamableHTTPClientTransport(new URL(r.serverUrl('platform')), {
      authProvider: provider,
    });
    const client = new Client({ name: 'ci-job', version: '1.0.0' });
    await client.connect(transport);
    const me = toolJson(await client.callTool({ name: 'whoami', arguments: {} }));
    await client.close();
    expect(me).toMatchObject({ email: ciEmail, sub: clientId, client_id: clientId, issuer: 'platform' });
    const tokens = provider.tokens()!;
    expect(tokens.refresh_token).toBeUndefined();
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ sub: clientId, azp: clientId, client_id: clientId, email: ciEmail });
    expect(String(claims.scope).split(' ')).toContain('mcp:platform');

    const audit = await adminApi('GET', `/admin/api/audit?client_id=${encodeURIComponent(clientId)}`);
    const items = audit.json.items as Array<Record<string, unknown>>;
    const issued = items.filter((i) => i.event === 'issued');
    expect(issued.length).toBeGreaterThan(0);
    for (const i of issued)
      expect(i).toMatchObject({ grant_type: 'client_credentials', email: ciEmail, subject: clientId });
    const clients = (await adminApi('GET', '/admin/api/clients')).json.items as Array<
      Record<string, unknown>
    >;
    expect(clients.find((c) => c.client_id === clientId)?.kind).toBe('machine');
  });

  it('scope: all its services; a requested scope narrows; beyond its services is invalid_scope', async () => {
    const clientId = await addClient(['platform', 'mail']);
    const all = await key.token(r.issuer, clientId);
    expect(all.status).toBe(200);
    expect(all.json).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      scope: 'mcp:platform mcp:mail',
    });
    expect(all.json.refresh_token).toBeUndefined();
    expect(all.json.id_token).toBeUndefined();
    const narrowed = await key.token(r.issuer, clientId, { scope: 'mcp:mail openid unknown:thing' });
    expect(narrowed.json.scope).toBe('mcp:mail');
    const beyond = await key.token(r.issuer, clientId, { scope: 'mcp:deals platform:admin' });
    expect(beyond.status).toBe(400);
    expect(beyond.json.error).toBe('invalid_scope');
  });

  it('a replayed assertion (same jti) is 401 invalid_client', async () => {
    const clientId = await addClient(['platform']);
    const assertion = await key.assertion(clientId, r.issuer);
    const form = {
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    };
    expect((await postForm(`${r.issuer}/oauth/token`, form)).status).toBe(200);
    const again = await postForm(`${r.issuer}/oauth/token`, form);
    expect(again.status).toBe(401);
    expect(again.json.error).toBe('invalid_client');
  });

  it('another key, or a client that is not a machine client, gets no machine token', async () => {
    const clientId = await addClient(['platform']);
    const other = await newMachineKey();
    const forged = await other.token(r.issuer, clientId);
    expect(forged.status).toBe(401);
    expect(forged.json.error).toBe('invalid_client');
    const cli = await postForm(`${r.issuer}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: 'platform-cli',
    });
    expect(cli.status).toBe(400);
    expect(cli.json.error).toBe('unauthorized_client');
    // And a machine client uses no other grant.
    const refresh = await key.token(r.issuer, clientId, { grant_type: 'refresh_token', refresh_token: 'x' });
    expect(refresh.json.error).toBe('unauthorized_client');
  });

  it('a DPoP proof binds the machine token', async () => {
    const clientId = await addClient(['platform']);
    const dpop = await newDpopKey();
    const t = await key.token(
      r.issuer,
      clientId,
      {},
      { dpop: await dpop.proof('POST', `${r.issuer}/oauth/token`) },
    );
    expect(t.status).toBe(200);
    expect(t.json.token_type).toBe('DPoP');
    expect(decodeJwt(String(t.json.access_token)).cnf).toEqual({ jkt: dpop.jkt });
  });

  it('revoke-client: its live token is refused at both gateways within 1 s, and the token endpoint answers invalid_client', async () => {
    const clientId = await addClient(['platform']);
    const t = await key.token(r.issuer, clientId);
    const token = String(t.json.access_token);
    const second = await r.stack.anotherGateway();
    const atSecond = () => gatewayStatusAt(`${second.url}/platform/mcp`, token);
    expect(await gatewayStatus(token)).toBe(200);
    expect(await atSecond()).toBe(200);

    const out = await admin(['revoke-client', '--client-id', clientId]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      new RegExp(
        `^revoked machine client ${clientId}: no new token; tokens issued at or before \\S+ are refused\\n$`,
      ),
    );
    const revokedAt = Date.now();
    await Promise.all([
      expect.poll(() => gatewayStatus(token), { timeout: 1000, interval: 50 }).toBe(401),
      expect.poll(atSecond, { timeout: 1000, interval: 50 }).toBe(401),
    ]);
    expect(Date.now() - revokedAt).toBeLessThanOrEqual(1000);

    const refused = await key.token(r.issuer, clientId);
    expect(refused.status).toBe(401);
    expect(refused.json.error).toBe('invalid_client');

    const unknown = await admin(['revoke-client', '--client-id', 'mc-nope']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/no machine client mc-nope/);
  });

  it('a machine client starts no device authorization and no authorization request', async () => {
    const clientId = await addClient(['platform']);
    const device = await postForm(`${r.issuer}/oauth/device_authorization`, {
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await key.assertion(clientId, r.issuer),
      scope: 'mcp:platform',
    });
    expect({ status: device.status, error: device.json.error }).toEqual({
      status: 400,
      error: 'unauthorized_client',
    });
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:9/callback',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      state: 'x',
    });
    const page = await fetch(`${r.issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
    expect(page.status).toBe(400);
    expect(page.headers.get('location')).toBeNull();
    expect(await page.text()).toContain('machine client');
  });

  it('bad registrations are 400 invalid_request, never a 500', async () => {
    const good = { name: 'x', jwks: key.jwks, email: ciEmail, services: ['platform'] };
    for (const [body, why] of [
      [{ ...good, jwks: undefined }, /exactly one of jwks/],
      [{ ...good, jwks_uri: 'https://keys.example/jwks' }, /exactly one of jwks/],
      [{ ...good, jwks: undefined, jwks_uri: 'http://keys.example/jwks' }, /https URL/],
      [{ ...good, jwks: { keys: [{ ...key.privateJwk }] } }, /public keys only/],
      [{ ...good, services: ['nope'] }, /unknown service/],
      [{ ...good, services: [] }, /non-empty/],
      [{ ...good, email: 'not-an-email' }, /email/],
      [{ ...good, workload_issuer: 'https://ci.example' }, /go together/],
      [{ ...good, name: 'a\u0001b' }, /name/],
    ] as const) {
      const res = await adminApi('POST', '/admin/api/clients', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error).toBe('invalid_request');
      expect(String(res.json.error_description)).toMatch(why);
    }
  });
});
