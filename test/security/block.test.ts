// Attack (issue 17, "blocking a user"): after revoke-user a user still got codes silently with prompt=none, and
// there was no way to keep them out. Real IdP, gateway and `platform admin`: `block --email` cuts the user's
// tokens at the gateway like revoke-user and refuses every new code (prompt=none too), device approval, refresh
// and userinfo answer; `unblock` lets them sign in again while the old tokens stay revoked.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runPlatform } from '../cli/support.ts';
import { errorOf } from '../gateway/helpers.ts';
import { seedUser } from '../helpers/database.ts';
import {
  answerDevice,
  authorizeRequest,
  pollDevice,
  refresh,
  signIn,
  startDevice,
} from '../helpers/oauth.ts';
import { type SecurityStack, startSecurityStack } from '../helpers/security-stack.ts';

let stack: SecurityStack;
let adminToken: string;

beforeAll(async () => {
  stack = await startSecurityStack({ redisUrl: inject('redisUrl') });
  adminToken = (await signIn(stack.idp.issuer, stack.admin.sessionToken, { scope: 'platform:admin' }))
    .access_token;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const admin = (args: string[]) =>
  runPlatform(['admin', ...args, '--issuer', stack.idp.issuer, '--token', adminToken], {
    HOME: '/nonexistent',
  });

const userinfo = (t: string) =>
  fetch(`${stack.idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${t}` } });

describe('platform admin block / unblock', () => {
  it('block: old tokens cut at the gateway, no code (prompt=none too), device approval, refresh or userinfo', async () => {
    const u = await seedUser(stack.db.pool);
    const t = await signIn(stack.idp.issuer, u.sessionToken, { scope: 'openid email mcp:mail' });
    expect((await stack.viaGateway(t.access_token)).status).toBe(200);
    // A device approved before the block, not yet collected.
    const approved = await startDevice(stack.idp.issuer, { scope: 'openid mcp:mail' });
    expect((await answerDevice(stack.idp.issuer, approved, u.sessionToken)).answer?.status).toBe(200);

    const r = await admin(['block', '--email', u.email.toUpperCase()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^blocked ${u.email.replace(/[.+]/g, '\\$&')}: tokens issued at or before \\S+ are refused; 1 sign-in\\(s\\) and 1 code\\(s\\) revoked; no new sign-in until unblocked\\n$`,
      ),
    );

    await expect.poll(async () => (await stack.viaGateway(t.access_token)).status).toBe(401);
    expect(errorOf(await stack.viaGateway(t.access_token)).reason).toBe('token_revoked');
    expect((await refresh(stack.idp.issuer, t.refresh_token)).json.error).toBe('invalid_grant');
    expect((await userinfo(t.access_token)).status).toBe(401);
    expect((await pollDevice(stack.idp.issuer, approved.device_code)).json.error).toBe('invalid_grant');

    for (const prompt of [undefined, 'none']) {
      const a = await authorizeRequest({
        issuer: stack.idp.issuer,
        sessionToken: u.sessionToken,
        params: { scope: 'openid mcp:mail', prompt },
      });
      expect(a.status).toBe(302);
      expect(a.location?.searchParams.get('error')).toBe('access_denied');
      expect(a.location?.searchParams.get('code')).toBeNull();
      expect(a.location?.searchParams.get('state')).toBe(a.params.state);
    }

    const d = await startDevice(stack.idp.issuer, { scope: 'openid mcp:mail' });
    const { page, answer } = await answerDevice(stack.idp.issuer, d, u.sessionToken);
    expect(page.status).toBe(403);
    expect(page.body).toContain('blocked');
    expect(answer).toBeUndefined();
    expect((await pollDevice(stack.idp.issuer, d.device_code)).json.error).toBe('authorization_pending');

    // Listed in the admin API and on the user's page, and audited.
    const list = await stack.adminApi('GET', '/admin/api/blocks');
    expect(list.json.items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ email: u.email, blocked_by: `admin:${stack.admin.email}` }),
      ]),
    );
    const user = await stack.adminApi('GET', `/admin/api/users/${encodeURIComponent(u.email)}`);
    expect(user.json.blocked).toMatchObject({ blocked_by: `admin:${stack.admin.email}` });
    const audit = await stack.adminApi('GET', `/admin/api/audit?${new URLSearchParams({ email: u.email })}`);
    expect(JSON.stringify(audit.json)).toContain('"block"');
  });

  it('unblock: the user signs in again; tokens revoked by the block stay revoked', async () => {
    const u = await seedUser(stack.db.pool);
    const t = await signIn(stack.idp.issuer, u.sessionToken, { scope: 'openid email mcp:mail' });
    const b = await stack.adminApi('POST', '/admin/api/block', { email: u.email });
    expect(b.status).toBe(200);
    expect(b.json).toMatchObject({ email: u.email, blocked: true, created: true, refresh_families: 1 });
    expect((await stack.adminApi('POST', '/admin/api/block', { email: u.email })).json.created).toBe(false);

    const r = await admin(['unblock', '--email', u.email]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`unblocked ${u.email}: the user may sign in again\n`);
    expect((await admin(['unblock', '--email', u.email])).stdout).toBe(`${u.email} was not blocked\n`);

    // A fresh sign-in works (once past the block's cut-off second), the old sign-in and token do not.
    let again = await signIn(stack.idp.issuer, u.sessionToken, { scope: 'openid email mcp:mail' });
    await expect
      .poll(async () => {
        again = await signIn(stack.idp.issuer, u.sessionToken, { scope: 'openid email mcp:mail' });
        return (await stack.viaGateway(again.access_token)).status;
      })
      .toBe(200);
    expect((await userinfo(again.access_token)).status).toBe(200);
    expect((await refresh(stack.idp.issuer, again.refresh_token)).status).toBe(200);
    expect((await refresh(stack.idp.issuer, t.refresh_token)).json.error).toBe('invalid_grant');
    expect((await stack.viaGateway(t.access_token)).status).toBe(401);
  });

  it('bad input: no email is a usage error (exit 2), a malformed one 400 invalid_request', async () => {
    const r = await admin(['block', '--email', ' ']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--email must not be empty');
    const bad = await stack.adminApi('POST', '/admin/api/block', { email: 'not an email' });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('invalid_request');
  });
});
