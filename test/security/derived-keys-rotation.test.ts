// After an emergency rotation the keys the provider derives for itself (CSRF, sign-in marker, DPoP nonces) must
// not come from the withdrawn signing key, which may stay mounted as PLATFORM_OIDC_PRIVATE_KEY: whoever holds the
// leaked key could otherwise make DPoP nonces ahead of time (and forge the other two). A real `platform idp` with
// PLATFORM_KEY_ROTATION=auto importing a mounted static key, PLATFORM_DPOP_NONCE=on; the nonce a holder of the
// leaked PEM would compute is refused, before and after the emergency rotation.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DpopNonces } from '../../lib/dpop/index.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { seedUser } from '../helpers/database.ts';
import { dpopTokenRequest, newDpopKey } from '../helpers/dpop.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { CLI, signIn } from '../helpers/oauth.ts';
import { testSigningKeyPem } from '../helpers/processes.ts';

const ADMIN = 'keys-admin@example.com';
const f = idpWithUser({
  PLATFORM_KEY_ROTATION: 'auto',
  PLATFORM_KEY_ENCRYPTION_KEY: 'derived-keys-test-encryption-secret-0123456789',
  PLATFORM_KEY_PUBLISH_AHEAD: '1h',
  PLATFORM_KEY_LIFETIME: '30d',
  PLATFORM_DPOP_NONCE: 'on',
  PLATFORM_ADMIN_EMAILS: ADMIN,
});

/** The nonce the provider derived from the mounted private key (as configured: trimmed) before: what the leaked PEM lets anyone compute. */
const leakedNonce = () =>
  new DpopNonces(
    createHmac('sha256', testSigningKeyPem().trim()).update('platform-idp dpop nonce v1').digest(),
  ).issueNonce();

const refreshForm = { grant_type: 'refresh_token', refresh_token: 'not-a-token', client_id: CLI };

async function answerTo(nonce: string) {
  return dpopTokenRequest(f.idp.issuer, refreshForm, await newDpopKey(), { nonce });
}

describe('keys derived by the provider after an emergency rotation', () => {
  it("a DPoP nonce made from the withdrawn (still mounted) key is refused; the provider's own is accepted", async () => {
    const before = await answerTo(leakedNonce());
    expect(before.json.error).toBe('use_dpop_nonce');

    const admin = await seedUser(f.db.pool, { email: ADMIN });
    const token = (await signIn(f.idp.issuer, admin.sessionToken, { scope: 'platform:admin' })).access_token;
    const rotated = await callAdminApi(f.idp.issuer, token, 'POST', '/admin/api/keys/rotate', {
      emergency: true,
    });
    expect(rotated.status).toBe(201);
    expect((rotated.json.withdrawn as string[]).length).toBeGreaterThan(0);

    const after = await answerTo(leakedNonce());
    expect(after.status).toBe(400);
    expect(after.json.error).toBe('use_dpop_nonce');
    // The control: the nonce the provider hands out gets past the nonce check (to the refresh token's own refusal).
    const own = after.res.headers.get('dpop-nonce')!;
    const ok = await answerTo(own);
    expect(ok.json.error).toBe('invalid_grant');
  });
});
