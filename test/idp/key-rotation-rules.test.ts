// The rotation's building blocks on their own: the sealing of private keys (a wrong key, a tampered or moved
// ciphertext never decrypts), the states derived from stored timestamps, and the configuration's bounds.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadIdpConfig } from '../../idp/config.ts';
import { KeyDecryptionError, KeySealer } from '../../idp/keys/crypto.ts';
import {
  deriveStates,
  jwksMaxAge,
  type KeyTimes,
  pollSeconds,
  RETENTION_SECONDS,
} from '../../idp/keys/schedule.ts';
import { ConfigError } from '../../lib/config.ts';
import { parseKeyNotice } from '../../lib/key-notices.ts';

const SECRET = 'unit-test-key-encryption-secret-0123456789abcdef';

describe('sealed private keys', () => {
  const sealer = new KeySealer(SECRET);
  const plain = randomBytes(1200);

  it('opens what it sealed, and the ciphertext differs every time', () => {
    const a = sealer.seal('kid-1', plain);
    const b = sealer.seal('kid-1', plain);
    expect(a.equals(b)).toBe(false);
    expect(sealer.open('kid-1', a).equals(plain)).toBe(true);
    expect(a.includes(plain.subarray(0, 32))).toBe(false);
  });

  it('refuses a different encryption key', () => {
    const sealed = sealer.seal('kid-1', plain);
    expect(() => new KeySealer(`${SECRET}x`).open('kid-1', sealed)).toThrow(KeyDecryptionError);
  });

  it('refuses any altered byte: version, IV, body, tag, or a truncation', () => {
    const sealed = sealer.seal('kid-1', plain);
    for (const at of [0, 1, 13, 400, sealed.length - 1]) {
      const t = Buffer.from(sealed);
      t[at]! ^= 0x01;
      expect(() => sealer.open('kid-1', t), `byte ${at}`).toThrow(KeyDecryptionError);
    }
    expect(() => sealer.open('kid-1', sealed.subarray(0, 20))).toThrow(KeyDecryptionError);
  });

  it("refuses another row's ciphertext (the kid is authenticated)", () => {
    expect(() => sealer.open('kid-2', sealer.seal('kid-1', plain))).toThrow(KeyDecryptionError);
  });
});

describe('states from the stored timestamps', () => {
  const S = 1000;
  const ret = RETENTION_SECONDS * S;
  const key = (kid: string, publishAt: number, activateAt: number, withdrawnAt?: number): KeyTimes => ({
    kid,
    publishAt,
    activateAt,
    withdrawnAt,
  });

  it('next → current → previous → expired as the clock passes', () => {
    const rows = [key('a', 0, 0), key('b', 100 * S, 200 * S)];
    const at = (t: number) =>
      Object.fromEntries([...deriveStates(rows, t).keys].map(([k, v]) => [k, v.state]));
    expect(at(50 * S)).toEqual({ a: 'current', b: 'scheduled' });
    expect(deriveStates(rows, 50 * S).published).toEqual(['a']);
    expect(at(150 * S)).toEqual({ a: 'current', b: 'next' });
    expect(deriveStates(rows, 150 * S).published.sort()).toEqual(['a', 'b']);
    expect(at(200 * S)).toEqual({ a: 'previous', b: 'current' });
    expect(deriveStates(rows, 200 * S).keys.get('a')!.unpublishAt).toBe(200 * S + ret);
    expect(at(200 * S + ret - 1)).toEqual({ a: 'previous', b: 'current' });
    expect(at(200 * S + ret)).toEqual({ a: 'expired', b: 'current' });
    expect(deriveStates(rows, 200 * S + ret).published).toEqual(['b']);
  });

  it('says when the next change is due, so a replica switches without re-reading', () => {
    const rows = [key('a', 0, 0), key('b', 100 * S, 200 * S)];
    expect(deriveStates(rows, 150 * S).changesAt).toBe(200 * S);
    expect(deriveStates(rows, 200 * S).changesAt).toBe(200 * S + ret);
    expect(deriveStates([key('a', 0, 0)], 1).changesAt).toBe(Number.POSITIVE_INFINITY);
  });

  it('a withdrawn key is neither current nor published; the previous current takes over if none newer', () => {
    const rows = [key('a', 0, 0), key('b', 10 * S, 20 * S, 30 * S), key('c', 30 * S, 30 * S)];
    const d = deriveStates(rows, 31 * S);
    expect(d.current).toBe('c');
    expect(d.keys.get('b')!.state).toBe('withdrawn');
    expect(d.published.sort()).toEqual(['a', 'c']);
    // a retired when b activated (b's withdrawal does not shorten a's tokens' life).
    expect(d.keys.get('a')!.retiredAt).toBe(30 * S);
  });
});

describe('clocks that disagree', () => {
  const S = 1000;
  it('a replica behind the one that made an emergency key drops the withdrawn key and signs with the new one', () => {
    // Made at t=100 s by a replica whose clock is 2 s ahead of this one (now = 98 s here).
    const rows: KeyTimes[] = [
      { kid: 'old', publishAt: 0, activateAt: 0, withdrawnAt: 100 * S },
      { kid: 'new', publishAt: 100 * S, activateAt: 100 * S, withdrawnAt: undefined },
    ];
    const d = deriveStates(rows, 98 * S);
    expect(d.current).toBe('new');
    expect(d.published).toEqual(['new']);
    expect(d.keys.get('old')!.state).toBe('withdrawn');
  });
});

describe('the key-set max-age and the poll follow the publish-ahead margin', () => {
  it('stay below a quarter of it (at most the static 300 s), never 0', () => {
    expect(jwksMaxAge(undefined)).toBe(300);
    expect(jwksMaxAge(2 * 3600)).toBe(300);
    expect(jwksMaxAge(600)).toBe(150);
    expect(jwksMaxAge(4)).toBe(1);
    expect(pollSeconds(2 * 3600)).toBe(30);
    expect(pollSeconds(8)).toBe(2);
    for (const ahead of [4, 6, 60, 3600, 7200])
      expect(jwksMaxAge(ahead) + pollSeconds(ahead)).toBeLessThan(ahead);
  });
});

describe('configuration', () => {
  const base = {
    PLATFORM_OIDC_ISSUER: 'https://id.example.com',
    PLATFORM_AUDIENCE: 'https://api.example.com',
    DATABASE_URL: 'postgresql://u@127.0.0.1/x',
    REDIS_URL: 'redis://127.0.0.1:6379',
  };
  const auto = { ...base, PLATFORM_KEY_ROTATION: 'auto', PLATFORM_KEY_ENCRYPTION_KEY: SECRET };
  const problem = (env: Record<string, string>) => {
    try {
      loadIdpConfig(env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    return 'accepted';
  };

  it('takes seconds and s/m/h/d, with the documented defaults', () => {
    expect(loadIdpConfig(auto).keyRotation).toEqual({
      encryptionKey: SECRET,
      lifetimeSeconds: 30 * 86_400,
      publishAheadSeconds: 7200,
    });
    expect(
      loadIdpConfig({ ...auto, PLATFORM_KEY_PUBLISH_AHEAD: '90', PLATFORM_KEY_LIFETIME: '2m' }).keyRotation,
    ).toMatchObject({
      publishAheadSeconds: 90,
      lifetimeSeconds: 120,
    });
    expect(
      loadIdpConfig({ ...auto, PLATFORM_KEY_PUBLISH_AHEAD: '1h', PLATFORM_KEY_LIFETIME: '7d' }).keyRotation,
    ).toMatchObject({
      publishAheadSeconds: 3600,
      lifetimeSeconds: 7 * 86_400,
    });
    // With rotation the static key is optional; without it, it stays required.
    expect(loadIdpConfig(auto).privateKey).toBeUndefined();
    expect(problem(base)).toMatch(/^PLATFORM_OIDC_PRIVATE_KEY: is required/);
  });

  it.each([
    [{ PLATFORM_KEY_ROTATION: 'yes' }, /^PLATFORM_KEY_ROTATION: must be one of/],
    [
      { PLATFORM_KEY_ENCRYPTION_KEY: '' },
      /^PLATFORM_KEY_ENCRYPTION_KEY: is required when PLATFORM_KEY_ROTATION=auto/,
    ],
    [
      { PLATFORM_KEY_ENCRYPTION_KEY: 'short-secret' },
      /^PLATFORM_KEY_ENCRYPTION_KEY: is 12 characters; use at least 32/,
    ],
    [
      { PLATFORM_KEY_ENCRYPTION_KEY: 'a'.repeat(40) },
      /^PLATFORM_KEY_ENCRYPTION_KEY: repeats too few characters/,
    ],
    [
      { PLATFORM_KEY_ENCRYPTION_KEY: 'change-me-to-48-random-bytes-from-openssl-rand-base64' },
      /example value/,
    ],
    [
      { PLATFORM_KEY_PUBLISH_AHEAD: '2 hours' },
      /^PLATFORM_KEY_PUBLISH_AHEAD: must be seconds or a number with s, m, h or d/,
    ],
    [{ PLATFORM_KEY_PUBLISH_AHEAD: '-5' }, /^PLATFORM_KEY_PUBLISH_AHEAD: must be seconds/],
    [{ PLATFORM_KEY_PUBLISH_AHEAD: '3s' }, /^PLATFORM_KEY_PUBLISH_AHEAD: must be between 4 s/],
    [
      { PLATFORM_KEY_PUBLISH_AHEAD: '2h', PLATFORM_KEY_LIFETIME: '1h' },
      /^PLATFORM_KEY_LIFETIME: \(3600 s\) must exceed PLATFORM_KEY_PUBLISH_AHEAD \(7200 s\)/,
    ],
    [{ PLATFORM_KEY_LIFETIME: '1.5d' }, /^PLATFORM_KEY_LIFETIME: must be seconds/],
  ])('refuses %o', (extra, expected) => {
    expect(problem({ ...auto, ...extra })).toMatch(expected);
  });

  it('refuses rotation variables without PLATFORM_KEY_ROTATION=auto (a half-done switch)', () => {
    expect(problem({ ...base, PLATFORM_OIDC_PRIVATE_KEY: 'x', PLATFORM_KEY_LIFETIME: '30d' })).toMatch(
      /^PLATFORM_KEY_LIFETIME: is set but PLATFORM_KEY_ROTATION is not auto/,
    );
  });
});

describe('key notices', () => {
  it('accept the documented shape and nothing else', () => {
    expect(parseKeyNotice('{"issuer":"https://id","withdrawn":["a"],"signing":"b"}')).toEqual({
      issuer: 'https://id',
      withdrawn: ['a'],
      signing: 'b',
    });
    expect(parseKeyNotice('{"issuer":"https://id"}')).toEqual({
      issuer: 'https://id',
      withdrawn: [],
      signing: undefined,
    });
    for (const bad of [
      'x',
      'null',
      '{"withdrawn":[]}',
      '{"issuer":"i","withdrawn":"a"}',
      '{"issuer":"i","withdrawn":[1]}',
    ])
      expect(parseKeyNotice(bad), bad).toBeUndefined();
  });
});
