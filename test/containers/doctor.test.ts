// The trial deployment as docs/deploy.md § Trial walks through it, from the host: `platform login` against the
// stack (the IdP sends the browser to the trial's sign-in page behind the proxy), a tool called with the stored
// sign-in, then `platform doctor` with that token and the tunnel profile off — no FAIL, the tunnel's rows SKIP.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZE_URL, runPlatform, tempConfigHome } from '../cli/support.ts';
import { answerConsent, parseConsentForm } from '../helpers/oauth.ts';
import { PLATFORM_BIN, startPlatform } from '../helpers/processes.ts';
import { REPO_DIR } from './images.ts';
import { allHealthy, cfg, stack } from './support.ts';

let home: Awaited<ReturnType<typeof tempConfigHome>>;
// An operator runs doctor against a settled stack: a container still in its first health interval is not a FAIL.
beforeAll(async () => {
  home = await tempConfigHome();
  await allHealthy();
});
afterAll(() => home?.cleanup());

function doctor(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [PLATFORM_BIN, 'doctor', ...args],
      {
        env: { ...process.env, PLATFORM_DOCTOR_DOCKER: cfg.docker, ...env },
        timeout: 120_000,
        cwd: REPO_DIR,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

/** A browser's GET: no redirect followed, the cookie (if any) sent. */
const get = (url: string, cookie?: string) =>
  fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });

/**
 * What the person at the browser does with the URL `platform login` printed: the IdP sends them to the sign-in
 * page, they sign in with an email, the IdP asks for consent (approved) and sends the browser back to the CLI.
 */
async function browserSignIn(authorizeUrl: string, email: string): Promise<string> {
  const base = stack().baseUrl;
  const first = await get(authorizeUrl);
  expect(first.status).toBe(302);
  const signInUrl = new URL(first.headers.get('location')!, authorizeUrl);
  expect(signInUrl.href.startsWith(`${base}/api/auth/signin?callbackUrl=`)).toBe(true);
  const page = await get(signInUrl.href);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('Development sign-in');
  const posted = await fetch(`${base}/api/auth/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
    body: new URLSearchParams({ callbackUrl: signInUrl.searchParams.get('callbackUrl')!, email }),
  });
  expect(posted.status).toBe(302);
  const cookie = posted.headers.get('set-cookie')!.split(';')[0]!;
  const [cookieName, sessionToken] = cookie.split('=') as [string, string];
  let back = await get(new URL(posted.headers.get('location')!, base).href, cookie);
  let location = back.headers.get('location');
  if (back.status === 200) {
    const html = await back.text();
    expect(parseConsentForm(html), html.slice(0, 300)).toBeDefined();
    const answer = await answerConsent({
      url: back.url,
      html,
      sessionToken,
      cookieName,
      decision: 'approve',
    });
    back = answer.res;
    location = answer.location?.href ?? null;
  }
  expect(back.status).toBe(302);
  expect(location).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
  const done = await get(location!);
  return done.text();
}

describe('a trial deployment, signed in to with platform login', () => {
  const email = `trial-${randomBytes(4).toString('hex')}@example.com`;
  let token = '';

  it('offers the scopes of the services it deploys, no others', async () => {
    const meta = (await (await fetch(`${stack().baseUrl}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    const mcp = meta.scopes_supported.filter((s) => s.startsWith('mcp:')).sort();
    expect(mcp).toEqual(['mcp:deals', 'mcp:mail', 'mcp:platform']);
  });

  it('signs in with platform login through the trial sign-in page and calls a tool', async () => {
    const login = startPlatform(['login', '--no-browser', '--issuer', stack().baseUrl], {
      XDG_CONFIG_HOME: home.dir,
    });
    await login.waitFor(AUTHORIZE_URL, 30_000);
    const url = AUTHORIZE_URL.exec(login.output())![1]!;
    // The default scopes: every one the deployment offers.
    const scope = new URL(url).searchParams.get('scope')!.split(' ');
    expect(scope).toEqual(expect.arrayContaining(['mcp:platform', 'mcp:mail', 'mcp:deals']));
    expect(scope.filter((s) => /^mcp:(calendar|crm)$/.test(s))).toEqual([]);
    expect(await browserSignIn(url, email)).toContain(`as ${email}`);
    expect(await login.exited).toBe(0);

    const t = await runPlatform(['token'], { XDG_CONFIG_HOME: home.dir });
    expect(t.code, t.stderr).toBe(0);
    token = t.stdout.trim();
    const call = await runPlatform(
      ['call', 'platform', 'whoami', '--gateway', stack().baseUrl],
      { XDG_CONFIG_HOME: home.dir },
      60_000,
    );
    expect(call.code, call.stderr).toBe(0);
    expect(call.stdout).toContain(email);
  });

  it('platform doctor with that token and the tunnel off: no FAIL, the tunnel rows SKIP', async () => {
    expect(token).not.toBe('');
    const r = await doctor(
      ['--base-url', stack().baseUrl, '--compose', 'deploy/compose.yaml', '--project', stack().project],
      // As the operator runs it: the same user, so the stored login's DPoP key signs for the bound token.
      { PLATFORM_TOKEN: token, XDG_CONFIG_HOME: home.dir },
    );
    process.stdout.write(`${r.out}\n`);
    expect(r.out).not.toMatch(/^FAIL/m);
    for (const ref of ['#1', '#2', '#3', '#4', '#5', '#6', '#7', '#8', '#9', '#14', '#15', '#16'])
      expect(r.out, ref).toMatch(new RegExp(`^PASS\\s+${ref}\\s`, 'm'));
    for (const s of ['platform', 'mail', 'deals'])
      expect(r.out).toMatch(new RegExp(`^SKIP\\s+#10\\s+${s}\\s.*profile tunnel not running`, 'm'));
    expect(r.out).toMatch(/^SKIP\s+#1\s+tunnel\s.*profile tunnel not running/m);
    expect(r.out).toMatch(/^PASS\s+#14\s+deals/m);
    expect(r.code).toBe(0);
  });

  it('platform doctor names a documented variable the .env sets that a running container lacks', async () => {
    // The stack's .env as compose read it (its values in the doctor's environment, as compose's shell would
    // give them): every setting it makes is in every running container.
    const dotEnv = Object.fromEntries(
      readFileSync(stack().envFile, 'utf8')
        .split('\n')
        .flatMap((l) => {
          const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(l);
          return m ? [[m[1]!, m[2]!]] : [];
        }),
    );
    const args = [
      '--base-url',
      stack().baseUrl,
      '--compose',
      'deploy/compose.yaml',
      '--project',
      stack().project,
    ];
    const settled = await doctor(args, { ...dotEnv, PLATFORM_TOKEN: token, XDG_CONFIG_HOME: home.dir });
    expect(settled.out).toMatch(/^PASS\s+-\s+idp\s+documented settings reach it\s+[1-9]\d* setting/m);
    expect(settled.out).not.toMatch(/^FAIL/m);
    // The operator adds a line to .env and does not recreate the containers.
    const edited = await doctor(args, {
      ...dotEnv,
      PLATFORM_ENTITLEMENTS: 'managed',
      PLATFORM_TOKEN: token,
      XDG_CONFIG_HOME: home.dir,
    });
    expect(edited.out).toMatch(
      /^FAIL\s+-\s+idp\s+documented settings reach it\s+.*_idp_1 lacks PLATFORM_ENTITLEMENTS/m,
    );
    const line = edited.out.split('\n').find((l) => /^FAIL\s+-\s+idp\s+documented settings/.test(l)) ?? '';
    // Names only: a value may be a secret.
    expect(line).not.toContain('managed');
    expect(edited.code).toBe(1);
  });
});
