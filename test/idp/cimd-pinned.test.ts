// Pinned Client ID Metadata Documents (PLATFORM_CIMD_PINNED_DIR): Claude's documents answer 403 to
// data-centre addresses (https://github.com/anthropics/claude-ai-mcp/issues/650), so an operator keeps them.
// The shipped examples (deploy/cimd-pinned) are served from the folder and never fetched; a malformed file
// stops start-up with one line naming it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { authorizeRequest, exchangeCode } from '../helpers/oauth.ts';
import { startPlatform, testSigningKeyPem } from '../helpers/processes.ts';

const PINNED = fileURLToPath(new URL('../../deploy/cimd-pinned/', import.meta.url));
const CLAUDE_CODE = 'https://claude.ai/oauth/claude-code-client-metadata';
// Every host refused: a fetch of a pinned document would fail, so success proves none was made.
const f = idpWithUser({ PLATFORM_CIMD_PINNED_DIR: PINNED, PLATFORM_CIMD_ALLOWED_HOSTS: 'nothing.invalid' });

describe('pinned documents', () => {
  it("Claude Code's pinned document: an ephemeral localhost port, consent, code and token, no fetch", async () => {
    // https://github.com/anthropics/claude-code/issues/56557: http://localhost:<ephemeral>/callback at run time.
    const redirect = 'http://localhost:41234/callback';
    const r = await authorizeRequest({
      issuer: f.idp.issuer,
      sessionToken: f.user.sessionToken,
      consent: 'approve',
      params: { client_id: CLAUDE_CODE, redirect_uri: redirect, scope: 'openid mcp:platform offline_access' },
    });
    expect(r.consentShown).toBe(true);
    expect(r.status, r.body).toBe(302);
    const code = r.location!.searchParams.get('code')!;
    const t = await exchangeCode(f.idp.url, {
      code,
      verifier: r.verifier,
      redirectUri: redirect,
      clientId: CLAUDE_CODE,
    });
    expect(t.status, t.text).toBe(200);
    expect(f.idp.output()).not.toContain('client metadata document fetched');
  });

  it('a malformed file stops start-up with one line naming it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pinned-'));
    await writeFile(
      join(dir, 'broken.json'),
      '{"client_id": "https://x.example/c.json", "redirect_uris": []}',
    );
    const p = startPlatform(['idp'], {
      IDP_PORT: '0',
      PLATFORM_OIDC_ISSUER: 'http://127.0.0.1:1',
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: 'https://platform.test/api',
      DATABASE_URL: f.db.url,
      REDIS_URL: inject('redisUrl'),
      PLATFORM_CIMD_PINNED_DIR: dir,
    });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toMatch(/PLATFORM_CIMD_PINNED_DIR.*broken\.json/);
    await rm(dir, { recursive: true });
  });
});
