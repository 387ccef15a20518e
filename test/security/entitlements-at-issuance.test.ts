// Attack (issue 17, "entitlements are checked at every issuance"): a device code approved before an ungrant still
// got the ungranted service. Managed entitlements, real IdP and gateway: a service is granted, a code / a device
// approval / a sign-in is obtained, the service is ungranted, then the code is exchanged, the device polls, the
// sign-in refreshes — none of the tokens carries the service, and the gateway refuses it for that service.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SeededUser } from '../helpers/database.ts';
import {
  answerDevice,
  exchangeCode,
  obtainCode,
  pollDevice,
  refresh,
  signIn,
  startDevice,
} from '../helpers/oauth.ts';
import { grantedUser, type SecurityStack, startSecurityStack, ungrant } from '../helpers/security-stack.ts';

const SCOPE = 'openid email mcp:mail mcp:deals';
let stack: SecurityStack;

beforeAll(async () => {
  stack = await startSecurityStack({
    redisUrl: inject('redisUrl'),
    env: { PLATFORM_ENTITLEMENTS: 'managed' },
  });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

const granted = () => grantedUser(stack, ['mail', 'deals']);
const ungrantMail = (u: SeededUser) => ungrant(stack, 'mail', u.email);

/** The token response left mail out, and the gateway does not serve mail with the access token. */
async function withoutMail(body: Record<string, unknown>) {
  expect(String(body.scope).split(' ')).not.toContain('mcp:mail');
  expect(String(body.scope).split(' ')).toContain('mcp:deals');
  expect(String(decodeJwt(String(body.access_token)).scope).split(' ')).not.toContain('mcp:mail');
  expect((await stack.viaGateway(String(body.access_token))).status).not.toBe(200);
}

describe('entitlements are checked at every issuance', () => {
  it('a device code approved before the ungrant gets no ungranted service', async () => {
    const u = await granted();
    const d = await startDevice(stack.idp.issuer, { scope: SCOPE });
    const { page, answer } = await answerDevice(stack.idp.issuer, d, u.sessionToken);
    expect(page.body).toContain('mail');
    expect(answer?.status).toBe(200);
    await ungrantMail(u);
    const r = await pollDevice(stack.idp.issuer, d.device_code);
    expect(r.status, r.text).toBe(200);
    await withoutMail(r.json);
  });

  it('an authorization code issued before the ungrant gets no ungranted service', async () => {
    const u = await granted();
    const c = await obtainCode({
      issuer: stack.idp.issuer,
      sessionToken: u.sessionToken,
      params: { scope: SCOPE },
    });
    await ungrantMail(u);
    const r = await exchangeCode(stack.idp.issuer, c);
    expect(r.status, r.text).toBe(200);
    await withoutMail(r.json);
  });

  it('a refresh after the ungrant gets no ungranted service', async () => {
    const u = await granted();
    const t = await signIn(stack.idp.issuer, u.sessionToken, { scope: SCOPE });
    expect(t.scope.split(' ')).toContain('mcp:mail');
    expect((await stack.viaGateway(t.access_token)).status).toBe(200);
    await ungrantMail(u);
    const r = await refresh(stack.idp.issuer, t.refresh_token);
    expect(r.status, r.text).toBe(200);
    await withoutMail(r.json);
  });
});
