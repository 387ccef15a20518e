// `platform doctor` as an operator runs it, against real `platform idp`, `platform tool platform` and
// `platform gateway` processes: every applicable check passes on a healthy service, a stopped tool server and
// a rejected token show as the right failed rows, and the exit code follows the rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DeployStack, startDeployStack } from './stack.ts';
import { row, runDoctor } from './support.ts';

let stack: DeployStack;

beforeAll(async () => {
  // mail and deals are fronted by the gateway, but their tool servers are not running.
  stack = await startDeployStack({ services: ['platform', 'mail', 'deals'], live: ['platform'] });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

describe('platform doctor against a running stack', () => {
  it('passes every check on a healthy service, #14 included when given a token', async () => {
    const r = await runDoctor(['--base-url', stack.gatewayUrl, '--service', 'platform'], {
      PLATFORM_TOKEN: stack.token,
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.rows.map((x) => `${x.verdict} ${x.ref} ${x.subject} ${x.name}`)).toEqual([
      'PASS #2 platform health route under public host',
      'PASS #3 platform protected-resource metadata',
      'PASS #4 platform POST /mcp without bearer → 401',
      'PASS #5 platform fake bearer → 401 with reason',
      'PASS - platform foreign Host refused (421)',
      'PASS - platform foreign Origin refused (403)',
      'PASS #14 platform tools/list with a token',
      'PASS - issuer discovery metadata',
      'PASS - issuer key set (JWKS)',
    ]);
    expect(row(r.rows, 'platform', '#3').detail).toContain(`issuers ${stack.idp.issuer}`);
    expect(row(r.rows, 'platform', '#4').detail).toContain(
      `resource_metadata="${stack.gatewayUrl}/platform/.well-known/oauth-protected-resource"`,
    );
    expect(row(r.rows, 'platform', '#5').detail).toMatch(/INVALID_TOKEN; reason "\w+"/);
    expect(row(r.rows, 'platform', '#14').detail).toContain('whoami');
    expect(r.stdout).toMatch(/^summary: PASS 9 \/ FAIL 0 \/ SKIP 0/m);
  });

  it('skips #14 without a token and still exits 0', async () => {
    const r = await runDoctor(['--base-url', `${stack.gatewayUrl}/`, '--service', 'platform']);
    expect(r.code).toBe(0);
    const tools = row(r.rows, 'platform', '#14');
    expect(tools.verdict).toBe('SKIP');
    expect(tools.detail).toContain('PLATFORM_TOKEN');
    expect(r.rows.filter((x) => x.verdict === 'FAIL')).toEqual([]);
  });

  it('checks platform, mail and deals by default: stopped tool servers fail #2 and #14, exit 1', async () => {
    const r = await runDoctor(['--base-url', stack.gatewayUrl], { PLATFORM_TOKEN: stack.token });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('(services: platform, mail, deals)');
    for (const s of ['mail', 'deals']) {
      expect(row(r.rows, s, '#2')).toMatchObject({ verdict: 'FAIL' });
      expect(row(r.rows, s, '#2').detail).toContain('503 UPSTREAM_UNAVAILABLE');
      expect(row(r.rows, s, '#14').verdict).toBe('FAIL');
      // The gateway still answers for them: metadata, challenges and guards pass.
      for (const ref of ['#3', '#4', '#5', 'foreign Host', 'foreign Origin'])
        expect(row(r.rows, s, ref).verdict).toBe('PASS');
    }
    expect(r.rows.filter((x) => x.subject === 'platform').every((x) => x.verdict === 'PASS')).toBe(true);
    // The three services name the same issuer: its checks run once.
    expect(r.rows.filter((x) => x.subject === 'issuer')).toHaveLength(2);
  });

  it("fails #14 with the gateway's reason when the token is not accepted", async () => {
    const r = await runDoctor(['--base-url', stack.gatewayUrl, '--service', 'platform'], {
      PLATFORM_TOKEN: 'not-a-token',
    });
    expect(r.code).toBe(1);
    const tools = row(r.rows, 'platform', '#14');
    expect(tools.verdict).toBe('FAIL');
    expect(tools.detail).toMatch(/answered 401 INVALID_TOKEN \(\w+\)/);
  });
});
