// Impossible dates in the audit filters are refused with the documented 400 `invalid_request`, never read as a
// neighbouring day (Date.parse reads 2026-02-30 as March 2, widening or shifting an export without a word). The
// real IdP's admin API, its console page and the CLI's option parsing; the rule is lib/iso-time.ts.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseTime } from '../../cli/admin/format.ts';
import { parseIsoTime } from '../../lib/iso-time.ts';
import { callAdminApi } from '../helpers/admin-api.ts';
import { seedUser } from '../helpers/database.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { signIn } from '../helpers/oauth.ts';

const admin = `admin-${randomUUID().slice(0, 8)}@example.com`;
const f = idpWithUser({ PLATFORM_ADMIN_EMAILS: admin });

const IMPOSSIBLE = [
  '2026-02-30',
  '2025-02-29',
  '2026-04-31',
  '2026-13-01',
  '2026-00-10',
  '2026-02-28T24:00',
  '2026-02-28T10:60Z',
  '2026-02-28T10:00:61Z',
  '2026-02-28T10:00+25:00',
  '2026-02-28junk',
];

describe('audit filters: impossible dates', () => {
  it('the admin API answers 400 invalid_request for each; real dates (a leap day) are accepted', async () => {
    const u = await seedUser(f.db.pool, { email: admin });
    const token = (await signIn(f.idp.issuer, u.sessionToken, { scope: 'platform:admin' })).access_token;
    for (const v of IMPOSSIBLE) {
      for (const name of ['since', 'until']) {
        const r = await callAdminApi(
          f.idp.issuer,
          token,
          'GET',
          `/admin/api/audit?${name}=${encodeURIComponent(v)}`,
        );
        expect(r.status, `${name}=${v}`).toBe(400);
        expect(r.json.error).toBe('invalid_request');
        expect(String(r.json.error_description)).toMatch(new RegExp(`${name} must be an ISO 8601`));
      }
    }
    for (const v of ['2024-02-29', '2026-11-23T14:00:05.123Z', '2026-11-23T14:00+01:00']) {
      const r = await callAdminApi(
        f.idp.issuer,
        token,
        'GET',
        `/admin/api/audit?since=${encodeURIComponent(v)}`,
      );
      expect(r.status, v).toBe(200);
    }
  });

  it('the CLI refuses them as a usage error before asking the IdP', () => {
    for (const v of IMPOSSIBLE)
      expect(() => parseTime('--since', v), v).toThrow(/--since must be an ISO 8601/);
    expect(parseTime('--since', '2024-02-29')).toBe('2024-02-29T00:00:00.000Z');
    expect(parseIsoTime('2026-02-28T10:00:00+01:00')?.toISOString()).toBe('2026-02-28T09:00:00.000Z');
  });
});
