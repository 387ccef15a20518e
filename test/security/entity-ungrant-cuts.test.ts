// An entity ungrant cuts the live tokens only of those who lose a permission (docs/idp.md § Entity grants): one
// that removes nothing — an entity the user never had, or `write` where only `read` was granted — cuts no one,
// while one that removes a held permission cuts that user's live tokens. A real `platform idp`; the IdP's own
// userinfo answers a cut token 401 as every gateway does.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { callAdminApi } from '../helpers/admin-api.ts';
import { seedUser } from '../helpers/database.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { signIn } from '../helpers/oauth.ts';

const admin = `admin-${randomUUID().slice(0, 8)}@example.com`;
const f = idpWithUser({ PLATFORM_ADMIN_EMAILS: admin });

const userinfo = (token: string) =>
  fetch(`${f.idp.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } }).then(
    (r) => r.status,
  );

describe('an entity ungrant that removes nothing', () => {
  it("cuts no live token; one that removes a held permission cuts the user's", async () => {
    const adminUser = await seedUser(f.db.pool, { email: admin });
    const adminToken = (await signIn(f.idp.issuer, adminUser.sessionToken, { scope: 'platform:admin' }))
      .access_token;
    const entity = `deal:${randomUUID().slice(0, 8)}`;
    const granted = await callAdminApi(f.idp.issuer, adminToken, 'POST', '/admin/api/entitlements', {
      entity,
      permission: 'read',
      email: f.user.email,
    });
    expect(granted.status).toBe(200);
    const live = await signIn(f.idp.issuer, f.user.sessionToken);
    expect(await userinfo(live.access_token)).toBe(200);
    const ungrant = (q: Record<string, string>) =>
      callAdminApi(
        f.idp.issuer,
        adminToken,
        'DELETE',
        `/admin/api/entitlements?${new URLSearchParams({ email: f.user.email, ...q })}`,
      );

    const noOps: Record<string, string>[] = [
      { entity: 'deal:never-granted' },
      { entity, permission: 'write' },
    ];
    for (const q of noOps) {
      const r = await ungrant(q);
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ removed: false, subjects: [] });
      expect(r.json.cutoff ?? null).toBeNull();
      expect(await userinfo(live.access_token)).toBe(200);
    }

    // The control: removing the read the user holds cuts the live token.
    const r = await ungrant({ entity, permission: 'read' });
    expect(r.json).toMatchObject({ removed: true, subjects: [f.user.sub] });
    expect(await userinfo(live.access_token)).toBe(401);
  });
});
