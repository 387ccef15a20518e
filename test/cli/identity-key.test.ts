// `platform identity-key <service>` as a real process: the key a tool server is given, held to the documented
// derivation (computed here independently), and its exit codes.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { runPlatform } from './support.ts';

const SECRET = 'cli-test-identity-secret-0123456789abcdef';

describe('platform identity-key', () => {
  it('prints hex(HMAC-SHA256(secret, "platform-identity-v2:" + service)) and exits 0', async () => {
    const r = await runPlatform(['identity-key', 'deals'], { GATEWAY_IDENTITY_SECRET: SECRET });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const expected = createHmac('sha256', SECRET).update('platform-identity-v2:deals').digest('hex');
    expect(r.stdout).toBe(`${expected}\n`);
    const mail = await runPlatform(['identity-key', 'mail'], { GATEWAY_IDENTITY_SECRET: SECRET });
    expect(mail.stdout.trim()).toMatch(/^[0-9a-f]{64}$/);
    expect(mail.stdout).not.toBe(r.stdout);
  });

  it('exits 1 with one line when the secret is missing or shorter than 32 characters', async () => {
    for (const env of [{}, { GATEWAY_IDENTITY_SECRET: 'x'.repeat(31) }]) {
      const r = await runPlatform(['identity-key', 'deals'], env);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/GATEWAY_IDENTITY_SECRET/)]);
    }
  });

  it('exits 2 on a usage error: no service, a malformed service name, an extra argument', async () => {
    for (const args of [
      ['identity-key'],
      ['identity-key', 'Deals/../x'],
      ['identity-key', 'deals', 'mail'],
    ]) {
      const r = await runPlatform(args, { GATEWAY_IDENTITY_SECRET: SECRET });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
    }
  });
});
