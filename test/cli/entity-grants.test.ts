// `platform admin grant|ungrant --entity`, listed by `entitlements`: the real CLI against a real `platform idp`,
// the grant history and the admin audit, and the `ent` claim of the tokens issued after each change.
import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import { seedUser } from '../helpers/database.ts';
import { refresh, sessionCookieName, signIn } from '../helpers/oauth.ts';
import { adminStack } from './admin-support.ts';

const st = adminStack();

describe('platform admin grant --entity', () => {
  it('grants read/write to an email, lists them, puts them in ent, ungrants them, all audited', async () => {
    const u = await seedUser(st.db.pool, { email: 'Erin@Example.com' });
    const g = await st.admin([
      'grant',
      '--entity',
      'deal:42',
      '--permission',
      'write',
      '--email',
      'ERIN@example.com',
    ]);
    expect(g.stderr).toBe('');
    expect(g.stdout).toBe('granted write on deal:42 to erin@example.com\n');
    await st.admin(['grant', '--entity', 'deal:42', '--permission', 'read', '--email', 'erin@example.com']);
    await st.admin(['grant', '--entity', 'deal:7', '--permission', 'read', '--email', 'erin@example.com']);
    const again = await st.admin([
      'grant',
      ...['--entity', 'deal:7', '--permission', 'read', '--email', 'erin@example.com'],
    ]);
    expect(again.stdout).toBe('granted read on deal:7 to erin@example.com (already granted)\n');

    const listed = JSON.parse((await st.admin(['entitlements', '--json'])).stdout);
    expect(listed.ent_max).toBe(100);
    expect(
      listed.entities.map((e: { entity: string; permission: string; email: string }) => [
        e.entity,
        e.permission,
        e.email,
      ]),
    ).toEqual([
      ['deal:42', 'read', 'erin@example.com'],
      ['deal:42', 'write', 'erin@example.com'],
      ['deal:7', 'read', 'erin@example.com'],
    ]);
    expect((await st.admin(['entitlements'])).stdout).toContain('deal:42');

    const t = await signIn(st.idp.issuer, u.sessionToken);
    expect(decodeJwt(t.access_token).ent).toEqual({ 'deal:42': ['read', 'write'], 'deal:7': ['read'] });

    const un = await st.admin(['ungrant', '--entity', 'deal:42', '--email', 'erin@example.com']);
    expect(un.stdout).toMatch(
      new RegExp(
        `^ungranted read and write on deal:42 from erin@example.com; live tokens cut for sub ${u.sub}`,
      ),
    );
    const r = await refresh(st.idp.issuer, t.refresh_token);
    expect(r.status).toBe(200);
    expect(decodeJwt(r.json.access_token as string).ent).toEqual({ 'deal:7': ['read'] });

    const changes = await st.db.pool.query(
      `SELECT action, entity, permission, email, actor, subjects FROM platform.entity_grant_changes
        WHERE email = 'erin@example.com' ORDER BY id`,
    );
    expect(changes.rows.map((c) => [c.action, c.entity, c.permission])).toEqual([
      ['grant', 'deal:42', 'write'],
      ['grant', 'deal:42', 'read'],
      ['grant', 'deal:7', 'read'],
      ['grant', 'deal:7', 'read'],
      ['ungrant', 'deal:42', null],
    ]);
    expect(changes.rows[4].subjects).toEqual([u.sub]);
    await expect(st.db.pool.query('DELETE FROM platform.entity_grant_changes')).rejects.toThrow(
      /append-only/,
    );
    const audit = await st.db.pool.query(
      `SELECT action, target FROM platform.admin_audit WHERE target LIKE 'entity:%' ORDER BY id`,
    );
    expect(audit.rows).toContainEqual({ action: 'grant', target: 'entity:deal:42:erin@example.com' });
    expect(audit.rows).toContainEqual({ action: 'ungrant', target: 'entity:deal:42:erin@example.com' });
  });

  it('grants to a role too; bad input is a usage error or a 400 in the documented shape', async () => {
    const role = await st.admin(['grant', '--entity', 'deal:9', '--permission', 'read', '--role', 'analyst']);
    expect(role.stdout).toBe('granted read on deal:9 to role analyst\n');
    const both = await st.admin(['grant', '--entity', 'deal:9', '--service', 'mail', '--role', 'analyst']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give exactly one of --service or --entity');
    const badPermission = await st.api('entitlements', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ entity: 'deal:9', permission: 'admin', role: 'analyst' }),
    });
    expect(badPermission.status).toBe(400);
    expect(JSON.parse(badPermission.text)).toMatchObject({
      error: 'invalid_request',
      error_description: 'permission must be read or write',
    });
    const badEntity = await st.api('entitlements', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ entity: 'deal 9', permission: 'read', role: 'analyst' }),
    });
    expect(badEntity.status).toBe(400);
  });

  it('the console lists the entity grants that reach a user (read-only)', async () => {
    const u = await seedUser(st.db.pool, { email: 'frank@example.com' });
    await st.admin(['grant', '--entity', 'deal:77', '--permission', 'write', '--email', u.email]);
    const res = await fetch(`${st.idp.issuer}/admin/users/${encodeURIComponent(u.email)}`, {
      headers: { cookie: `${sessionCookieName(st.idp.issuer)}=${st.root.sessionToken}` },
    });
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain('<h2>Entity grants</h2>');
    expect(page).toMatch(/<td class="mono">deal:77<\/td><td>write<\/td><td>to the email, by /);
  });
});
