// `platform login --device --scope S` asks for S, as the browser login does (it asked for every scope the issuer
// offers whatever --scope said). A real CLI process polling a real `platform idp`; the user approves through the
// verification page's own form.
import { readFile } from 'node:fs/promises';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { answerDevice } from '../helpers/oauth.ts';
import { startPlatform } from '../helpers/processes.ts';
import { type ConfigHome, tempConfigHome } from './support.ts';

const CODE_LINE = /enter the code\s+([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})/;
const f = idpWithUser({});
let home: ConfigHome;

beforeAll(async () => {
  home = await tempConfigHome();
});
afterAll(async () => {
  await home?.cleanup();
});

describe('platform login --device --scope', () => {
  it('asks for exactly the scopes named: the page lists them, the stored token carries no other', async () => {
    const asked = 'openid email mcp:deals';
    const p = startPlatform(['login', '--device', '--scope', asked, '--no-dpop'], {
      XDG_CONFIG_HOME: home.dir,
      PLATFORM_ISSUER: f.idp.issuer,
    });
    try {
      await p.waitFor(/Waiting for approval/);
      const code = CODE_LINE.exec(p.output())![1]!;
      const verification = `${f.idp.issuer}/oauth/device?user_code=${code}`;
      const { page, answer } = await answerDevice(
        f.idp.issuer,
        { verification_uri_complete: verification } as Parameters<typeof answerDevice>[1],
        f.user.sessionToken,
      );
      expect(page.status).toBe(200);
      expect(page.body).toContain('mcp:deals');
      expect(page.body).not.toContain('mcp:mail');
      expect(answer).toBeDefined();
      expect(await p.exited).toBe(0);
    } finally {
      await p.stop();
    }
    const stored = JSON.parse(await readFile(home.credentials, 'utf8')) as { access_token: string };
    const scopes = String(decodeJwt(stored.access_token).scope).split(' ').sort();
    expect(scopes).toEqual(asked.split(' ').sort());
  });
});
