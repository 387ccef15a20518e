// `platform admin grant|ungrant --service` against an IdP whose entitlements are open: the grant is recorded but
// decides nothing, and the output says so (an operator read "granted" while every user kept every service);
// with PLATFORM_ENTITLEMENTS=managed the same commands say nothing of the kind. Entity grants apply in both modes
// and never carry the note.
import { describe, expect, it } from 'vitest';
import { adminStack } from './admin-support.ts';

const open = adminStack();
const managed = adminStack({ PLATFORM_ENTITLEMENTS: 'managed' });
const NOTE =
  '; no effect while the IdP’s entitlements are open (every user gets every service) until PLATFORM_ENTITLEMENTS=managed';

describe('platform admin grant --service', () => {
  it('says on an open IdP that the grant has no effect until PLATFORM_ENTITLEMENTS=managed', async () => {
    const g = await open.admin(['grant', '--service', 'mail', '--email', 'fay@example.com']);
    expect(g.code).toBe(0);
    expect(g.stdout).toBe(`granted mail to fay@example.com${NOTE}\n`);
    const json = JSON.parse(
      (await open.admin(['grant', '--service', 'mail', '--email', 'fay@example.com', '--json'])).stdout,
    );
    expect(json).toMatchObject({ service: 'mail', mode: 'open', created: false });
    const u = await open.admin(['ungrant', '--service', 'mail', '--email', 'fay@example.com']);
    expect(u.code).toBe(0);
    expect(u.stdout).toMatch(/^ungranted mail from fay@example.com/);
    expect(u.stdout).toContain(NOTE);
    const e = await open.admin([
      'grant',
      '--entity',
      'deal:1',
      '--permission',
      'read',
      '--email',
      'fay@example.com',
    ]);
    expect(e.stdout).toBe('granted read on deal:1 to fay@example.com\n');
  });

  it('says nothing of the kind on a managed IdP, where the grant decides', async () => {
    const g = await managed.admin(['grant', '--service', 'mail', '--email', 'fay@example.com']);
    expect(g.stdout).toBe('granted mail to fay@example.com\n');
    const u = await managed.admin(['ungrant', '--service', 'mail', '--email', 'fay@example.com']);
    expect(u.stdout).not.toContain('no effect');
  });
});
