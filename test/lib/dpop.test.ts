import {
  constants,
  createHash,
  createHmac,
  generateKeyPairSync,
  KeyObject,
  sign as nodeSign,
} from 'node:crypto';
import { Redis } from 'ioredis';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { describe, expect, inject, it } from 'vitest';
import { EMBEDDED_KEYS_HELD, embeddedJwkPem, embeddedKeys } from '../../lib/dpop/embedded-key.ts';
import {
  accessTokenHash,
  DPOP_FUTURE_LEEWAY_SECONDS,
  DPOP_JTI_RETENTION_SECONDS,
  DPOP_MAX_AGE_SECONDS,
  DpopNonces,
  DpopProofError,
  dpopJtiKey,
  jwkThumbprint,
  MemoryDpopReplayStore,
  normaliseHtu,
  RedisDpopReplayStore,
  verifyDpopProof,
} from '../../lib/dpop/index.ts';

// RFC 9449 §4.3: each check, refused by a proof that breaks it; the replay store and the nonces.

const ALGS = ['ES256', 'EdDSA', 'Ed25519'];
const URL_ = 'https://id.example.com/token';
const NOW = 1_800_000_000;

const es = await generateKeyPair('ES256', { extractable: true });
const esJwk = await exportJWK(es.publicKey);
const other = await generateKeyPair('ES256', { extractable: true });

interface ProofParts {
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  key?: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  jwk?: JWK;
  alg?: string;
}

async function proof(p: ProofParts = {}): Promise<string> {
  const alg = p.alg ?? 'ES256';
  return new SignJWT({ htm: 'POST', htu: URL_, iat: NOW, jti: crypto.randomUUID(), ...p.claims })
    .setProtectedHeader({ alg, typ: 'dpop+jwt', jwk: p.jwk ?? esJwk, ...p.header } as never)
    .sign(p.key ?? es.privateKey);
}

const verify = (jwt: string, o: Partial<Parameters<typeof verifyDpopProof>[1]> = {}) =>
  verifyDpopProof(jwt, { method: 'POST', url: URL_, now: NOW, algorithms: ALGS, ...o });

/** The error a proof is refused with (verifyDpopProof is synchronous: it throws). */
function refused(jwt: string, o: Partial<Parameters<typeof verifyDpopProof>[1]> = {}): DpopProofError {
  let e: unknown;
  try {
    verify(jwt, o);
  } catch (err) {
    e = err;
  }
  expect(e).toBeInstanceOf(DpopProofError);
  return e as DpopProofError;
}

describe('verifyDpopProof', () => {
  it('accepts a well-formed proof and returns the RFC 7638 thumbprint of its key', async () => {
    const jwt = await proof({ claims: { jti: 'j-1' } });
    const r = await verify(jwt);
    expect(r.jti).toBe('j-1');
    expect(r.iat).toBe(NOW);
    // RFC 7638 computed independently: the required members in lexicographic order, no whitespace.
    const canonical = JSON.stringify({ crv: esJwk.crv, kty: esJwk.kty, x: esJwk.x, y: esJwk.y });
    expect(r.jkt).toBe(createHash('sha256').update(canonical).digest('base64url'));
    expect(r.jkt).toBe(jwkThumbprint(esJwk));
  });

  it('accepts EdDSA proofs', async () => {
    const ed = await generateKeyPair('Ed25519', { extractable: true });
    const jwk = await exportJWK(ed.publicKey);
    expect(verify(await proof({ alg: 'EdDSA', key: ed.privateKey, jwk }))).toMatchObject({
      jkt: jwkThumbprint(jwk),
    });
  });

  it('refuses something that is not a JWT, or several proofs', async () => {
    expect((await refused('not-a-jwt')).reason).toBe('invalid_dpop_proof');
    expect((await refused('')).reason).toBe('invalid_dpop_proof');
    const one = await proof();
    expect((await refused(`${one},${one}`)).reason).toBe('invalid_dpop_proof');
  });

  it('refuses a typ other than dpop+jwt', async () => {
    expect((await refused(await proof({ header: { typ: 'JWT' } }))).message).toMatch(/typ/);
  });

  it('refuses an algorithm the server does not list, and none', async () => {
    expect((await refused(await proof(), { algorithms: ['EdDSA'] })).message).toMatch(/alg/);
    const [h, p] = (await proof()).split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'dpop+jwt', jwk: esJwk })).toString('base64url')}.${p}.`;
    expect(h).toBeTruthy();
    expect((await refused(none)).message).toMatch(/alg/);
  });

  it('refuses a missing jwk, or a jwk with private members', async () => {
    expect((await refused(await proof({ header: { jwk: undefined } }))).message).toMatch(/jwk/);
    const priv = await exportJWK(es.privateKey);
    expect((await refused(await proof({ jwk: priv }))).message).toMatch(/public/);
  });

  it('refuses a signature by another key than the jwk', async () => {
    expect((await refused(await proof({ key: other.privateKey }))).message).toMatch(/signature/);
  });

  it('refuses a proof without jti', async () => {
    expect((await refused(await proof({ claims: { jti: undefined } }))).message).toMatch(/jti/);
  });

  it('refuses another method', async () => {
    expect((await refused(await proof({ claims: { htm: 'GET' } }))).message).toMatch(/htm/);
    expect((await refused(await proof(), { method: 'GET' })).message).toMatch(/htm/);
  });

  it('refuses another URL, compares htu normalised and without query', async () => {
    expect(
      (await refused(await proof({ claims: { htu: 'https://id.example.com/userinfo' } }))).message,
    ).toMatch(/htu/);
    expect(
      (await refused(await proof({ claims: { htu: 'https://evil.example.com/token' } }))).message,
    ).toMatch(/htu/);
    expect((await refused(await proof({ claims: { htu: 'http://id.example.com/token' } }))).message).toMatch(
      /htu/,
    );
    expect((await refused(await proof({ claims: { htu: 42 } }))).message).toMatch(/htu/);
    // Same resource written differently: accepted.
    await verify(await proof({ claims: { htu: 'HTTPS://ID.example.com:443/token' } }));
    await verify(await proof(), { url: 'https://id.example.com/token?x=1#f' });
    await verify(await proof({ claims: { htu: 'https://id.example.com/token?y=2' } }));
  });

  it('refuses an old iat, a future iat, and a missing iat', async () => {
    expect((await refused(await proof({ claims: { iat: NOW - 61 } }))).message).toMatch(/too old/);
    expect((await refused(await proof({ claims: { iat: NOW + 61 } }))).message).toMatch(/future/);
    expect((await refused(await proof({ claims: { iat: undefined } }))).message).toMatch(/iat/);
    // 60 s each way (docs/security.md § DPoP).
    await verify(await proof({ claims: { iat: NOW - 60 } }));
    await verify(await proof({ claims: { iat: NOW + 60 } }));
  });

  it('a jti kept DPOP_JTI_RETENTION_SECONDS from its first use outlives every moment its proof is accepted', async () => {
    // Fake clocks in milliseconds: the proof first used as early as it is accepted (iat − ahead, at the start of
    // that second), then offered again at the last millisecond any second of its window still accepts it.
    for (const iat of [NOW - DPOP_MAX_AGE_SECONDS, NOW, NOW + DPOP_FUTURE_LEEWAY_SECONDS]) {
      const jwt = await proof({ claims: { iat } });
      let ms = (iat - DPOP_FUTURE_LEEWAY_SECONDS) * 1000;
      const seen = new MemoryDpopReplayStore(() => ms);
      const at = (t: number) => verify(jwt, { now: Math.floor(t / 1000) });
      const first = await at(ms);
      expect(await seen.firstUse(first.jti, first.jkt, DPOP_JTI_RETENTION_SECONDS)).toBe(true);
      ms = (iat + DPOP_MAX_AGE_SECONDS + 1) * 1000 - 1;
      const last = await at(ms);
      expect(await seen.firstUse(last.jti, last.jkt, DPOP_JTI_RETENTION_SECONDS)).toBe(false);
      // One millisecond later the proof is refused by its age alone.
      expect((await refused(jwt, { now: iat + DPOP_MAX_AGE_SECONDS + 1 })).message).toMatch(/too old/);
    }
  });

  it('requires ath when an access token is presented, and checks it', async () => {
    const token = 'eyJ.access.token';
    expect(accessTokenHash(token)).toBe(createHash('sha256').update(token).digest('base64url'));
    expect((await refused(await proof(), { accessToken: token })).message).toMatch(/ath/);
    expect(
      (await refused(await proof({ claims: { ath: accessTokenHash('other') } }), { accessToken: token }))
        .message,
    ).toMatch(/ath/);
    await verify(await proof({ claims: { ath: accessTokenHash(token) } }), { accessToken: token });
  });

  it('answers use_dpop_nonce when the server wants a nonce the proof lacks', async () => {
    const nonces = new DpopNonces('k'.repeat(32), { now: () => NOW * 1000 });
    const n = nonces.issueNonce();
    expect((await refused(await proof(), { nonceValid: (x) => nonces.nonceValid(x) })).reason).toBe(
      'use_dpop_nonce',
    );
    expect(
      (
        await refused(await proof({ claims: { nonce: 'stale' } }), {
          nonceValid: (x) => nonces.nonceValid(x),
        })
      ).reason,
    ).toBe('use_dpop_nonce');
    await verify(await proof({ claims: { nonce: n } }), { nonceValid: (x) => nonces.nonceValid(x) });
    expect((await refused(await proof({ claims: { nonce: 'a' } }), { nonce: 'b' })).reason).toBe(
      'use_dpop_nonce',
    );
    await verify(await proof({ claims: { nonce: 'b' } }), { nonce: 'b' });
  });
});

// A proof's key is imported once per (alg, jwk) and kept (lib/dpop/embedded-key.ts): what is kept must never stand
// in for a check. Each test starts with nothing kept.
describe('verifyDpopProof with keys seen before', () => {
  const fresh = async () => {
    embeddedKeys.clear();
    const k = await generateKeyPair('ES256', { extractable: true });
    return { ...k, jwk: await exportJWK(k.publicKey) };
  };

  it('keeps one entry per key and still checks the signature of every proof against it', async () => {
    const k = await fresh();
    const first = await verify(await proof({ key: k.privateKey, jwk: k.jwk }));
    const second = await verify(await proof({ key: k.privateKey, jwk: k.jwk }));
    expect(embeddedKeys.size).toBe(1);
    expect(second.jkt).toBe(first.jkt);
    expect(second.jkt).toBe(jwkThumbprint(k.jwk));
    // The kept key's jwk, signed by someone else: refused, however often the key was seen.
    expect((await refused(await proof({ key: other.privateKey, jwk: k.jwk }))).message).toMatch(/signature/);
    // And one byte of a good proof's signature changed.
    const good = await proof({ key: k.privateKey, jwk: k.jwk });
    const flipped = `${good.slice(0, -2)}${good.at(-2) === 'A' ? 'B' : 'A'}${good.at(-1)}`;
    expect((await refused(flipped)).message).toMatch(/signature/);
  });

  it('does not let a kept key pass under another alg', async () => {
    const k = await fresh();
    await verify(await proof({ key: k.privateKey, jwk: k.jwk }));
    // The same P-256 jwk under ES384, signed with it over SHA-384: a key/alg mismatch jose refuses.
    const header = Buffer.from(JSON.stringify({ alg: 'ES384', typ: 'dpop+jwt', jwk: k.jwk })).toString(
      'base64url',
    );
    const body = Buffer.from(JSON.stringify({ htm: 'POST', htu: URL_, iat: NOW, jti: 'j-384' })).toString(
      'base64url',
    );
    const sig = nodeSign('sha384', Buffer.from(`${header}.${body}`), {
      key: KeyObject.from(k.privateKey),
      dsaEncoding: 'ieee-p1363',
    }).toString('base64url');
    const e = await refused(`${header}.${body}.${sig}`, { algorithms: [...ALGS, 'ES384'] });
    expect(e.message).toMatch(/signature or jwk/);
  });

  it('keeps nothing for a jwk it refuses, nor for a padded one', async () => {
    const k = await fresh();
    await refused(await proof({ jwk: { ...k.jwk, x: 'AAAA' } }));
    expect(embeddedKeys.size).toBe(0);
    // Extra members are allowed in a jwk; a long one is verified but not kept.
    const padded = { ...k.jwk, note: 'x'.repeat(3000) } as JWK;
    expect(verify(await proof({ key: k.privateKey, jwk: padded }))).toMatchObject({
      jkt: jwkThumbprint(k.jwk),
    });
    expect(embeddedKeys.size).toBe(0);
  });

  it('holds at most EMBEDDED_KEYS_HELD keys', async () => {
    const k = await fresh();
    await verify(await proof({ key: k.privateKey, jwk: k.jwk }));
    for (let i = 0; i < EMBEDDED_KEYS_HELD; i++) {
      const n = await generateKeyPair('ES256', { extractable: true });
      await verify(await proof({ key: n.privateKey, jwk: await exportJWK(n.publicKey) }));
    }
    expect(embeddedKeys.size).toBe(EMBEDDED_KEYS_HELD);
    // The first key was pushed out; its proofs verify as before (imported again, another pushed out).
    expect(verify(await proof({ key: k.privateKey, jwk: k.jwk }))).toMatchObject({
      jkt: jwkThumbprint(k.jwk),
    });
    expect(embeddedKeys.size).toBe(EMBEDDED_KEYS_HELD);
  });
});

// The proof's signature is verified by fast-jwt over node:crypto, with the key imported by lib/dpop/embedded-key.ts:
// each rule that import and verifier must hold, broken by a proof signed by hand (node:crypto), so that nothing in
// the signing library can stand in for the check.
describe('verifyDpopProof against forged proofs', () => {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const claims = (extra: Record<string, unknown> = {}) => ({
    htm: 'POST',
    htu: URL_,
    iat: NOW,
    jti: crypto.randomUUID(),
    ...extra,
  });
  /** A compact JWS of `header` and `body`, signed over its input by `signer` (base64url of what it returns). */
  function forged(
    header: Record<string, unknown>,
    body: Record<string, unknown>,
    signer: (input: Buffer) => Buffer,
  ): string {
    const input = `${b64(header)}.${b64(body)}`;
    return `${input}.${signer(Buffer.from(input)).toString('base64url')}`;
  }
  const keyPair = (type: 'ec' | 'ed25519' | 'ed448' | 'rsa', o: Record<string, unknown> = {}) => {
    const k = generateKeyPairSync(type as 'ec', o as never) as unknown as {
      publicKey: KeyObject;
      privateKey: KeyObject;
    };
    return { ...k, jwk: k.publicKey.export({ format: 'jwk' }) as JWK };
  };
  const es256 = (key: KeyObject) => (input: Buffer) =>
    nodeSign('sha256', input, { key, dsaEncoding: 'ieee-p1363' });

  it('accepts a proof signed by hand the way RFC 7515 says (the forgeries below differ only where they say)', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const r = verify(forged({ alg: 'ES256', typ: 'dpop+jwt', jwk: k.jwk }, claims(), es256(k.privateKey)));
    expect(r.jkt).toBe(jwkThumbprint(k.jwk));
  });

  it('refuses a proof whose header jwk is another key than the one that signed it', () => {
    const signer = keyPair('ec', { namedCurve: 'P-256' });
    const named = keyPair('ec', { namedCurve: 'P-256' });
    const jwt = forged({ alg: 'ES256', typ: 'dpop+jwt', jwk: named.jwk }, claims(), es256(signer.privateKey));
    expect(refused(jwt).message).toMatch(/signature or jwk/);
    // Also once the named key is held (a proof of its own verified first).
    verify(forged({ alg: 'ES256', typ: 'dpop+jwt', jwk: named.jwk }, claims(), es256(named.privateKey)));
    expect(refused(jwt).message).toMatch(/signature or jwk/);
  });

  it('refuses alg none, with or without a signature, even from a server that lists it', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const unsigned = `${b64({ alg: 'none', typ: 'dpop+jwt', jwk: k.jwk })}.${b64(claims())}.`;
    expect(refused(unsigned).message).toMatch(/alg/);
    expect(refused(unsigned, { algorithms: [...ALGS, 'none'] }).message).toMatch(/signature or jwk/);
    const signed = forged({ alg: 'none', typ: 'dpop+jwt', jwk: k.jwk }, claims(), es256(k.privateKey));
    expect(refused(signed, { algorithms: [...ALGS, 'none'] }).message).toMatch(/signature or jwk/);
  });

  it('refuses HS256 keyed with the public jwk (algorithm confusion), even from a server that lists it', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const header = { alg: 'HS256', typ: 'dpop+jwt', jwk: k.jwk };
    for (const secret of [
      JSON.stringify(k.jwk),
      k.publicKey.export({ type: 'spki', format: 'pem' }) as string,
    ]) {
      const jwt = forged(header, claims(), (input) => createHmac('sha256', secret).update(input).digest());
      expect(refused(jwt).message).toMatch(/alg/);
      expect(refused(jwt, { algorithms: [...ALGS, 'HS256'] }).message).toMatch(/signature or jwk/);
    }
    // An oct jwk carries its secret: refused as not public.
    const oct = forged(
      { alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } },
      claims(),
      (input) => createHmac('sha256', 'secret').update(input).digest(),
    );
    expect(refused(oct, { algorithms: [...ALGS, 'HS256'] }).message).toMatch(/public/);
  });

  it('refuses ES256 with a P-384 key, and ES384 with a P-256 key', () => {
    const p384 = keyPair('ec', { namedCurve: 'P-384' });
    const algs = [...ALGS, 'ES384'];
    const es256By384 = forged({ alg: 'ES256', typ: 'dpop+jwt', jwk: p384.jwk }, claims(), (input) =>
      nodeSign('sha256', input, { key: p384.privateKey, dsaEncoding: 'ieee-p1363' }),
    );
    expect(refused(es256By384, { algorithms: algs }).message).toMatch(/signature or jwk/);
    // The same key under its own alg is fine.
    const es384 = forged({ alg: 'ES384', typ: 'dpop+jwt', jwk: p384.jwk }, claims(), (input) =>
      nodeSign('sha384', input, { key: p384.privateKey, dsaEncoding: 'ieee-p1363' }),
    );
    expect(verify(es384, { algorithms: algs }).jkt).toBe(jwkThumbprint(p384.jwk));
    // A P-256 jwk whose crv claims P-384.
    const p256 = keyPair('ec', { namedCurve: 'P-256' });
    const lying = forged(
      { alg: 'ES384', typ: 'dpop+jwt', jwk: { ...p256.jwk, crv: 'P-384' } },
      claims(),
      (input) => nodeSign('sha384', input, { key: p256.privateKey, dsaEncoding: 'ieee-p1363' }),
    );
    expect(refused(lying, { algorithms: algs }).message).toMatch(/signature or jwk/);
  });

  it('refuses a private jwk of each key type', () => {
    for (const k of [keyPair('ec', { namedCurve: 'P-256' }), keyPair('ed25519')]) {
      const priv = k.privateKey.export({ format: 'jwk' });
      const alg = priv.kty === 'EC' ? 'ES256' : 'EdDSA';
      const jwt = forged({ alg, typ: 'dpop+jwt', jwk: priv }, claims(), (input) =>
        nodeSign(alg === 'ES256' ? 'sha256' : null, input, { key: k.privateKey, dsaEncoding: 'ieee-p1363' }),
      );
      expect(refused(jwt).message).toMatch(/public/);
    }
  });

  it('refuses an RSA key under 2048 bits; accepts RS256 and PS256 with 2048', () => {
    const algs = [...ALGS, 'RS256', 'PS256'];
    const small = keyPair('rsa', { modulusLength: 1024 });
    const rs1024 = forged({ alg: 'RS256', typ: 'dpop+jwt', jwk: small.jwk }, claims(), (input) =>
      nodeSign('sha256', input, small.privateKey),
    );
    expect(refused(rs1024, { algorithms: algs }).message).toMatch(/signature or jwk/);
    const big = keyPair('rsa', { modulusLength: 2048 });
    const rs = forged({ alg: 'RS256', typ: 'dpop+jwt', jwk: big.jwk }, claims(), (input) =>
      nodeSign('sha256', input, big.privateKey),
    );
    expect(verify(rs, { algorithms: algs }).jkt).toBe(jwkThumbprint(big.jwk));
    const pss = (saltLength: number) => (input: Buffer) =>
      nodeSign('sha256', input, {
        key: big.privateKey,
        padding: constants.RSA_PKCS1_PSS_PADDING,
        saltLength,
      });
    const ps = forged({ alg: 'PS256', typ: 'dpop+jwt', jwk: big.jwk }, claims(), pss(32));
    expect(verify(ps, { algorithms: algs }).jkt).toBe(jwkThumbprint(big.jwk));
    // PS256 is PSS with a 32-byte salt (RFC 7518 §3.5); an RS256 signature under PS256 is refused.
    const mixed = forged({ alg: 'PS256', typ: 'dpop+jwt', jwk: big.jwk }, claims(), (input) =>
      nodeSign('sha256', input, big.privateKey),
    );
    expect(refused(mixed, { algorithms: algs }).message).toMatch(/signature or jwk/);
  });

  it('takes EdDSA and Ed25519 with an Ed25519 key only', () => {
    const ed = keyPair('ed25519');
    const sign = (input: Buffer) => nodeSign(null, input, ed.privateKey);
    for (const alg of ['EdDSA', 'Ed25519'])
      expect(verify(forged({ alg, typ: 'dpop+jwt', jwk: ed.jwk }, claims(), sign)).jkt).toBe(
        jwkThumbprint(ed.jwk),
      );
    const ed448 = keyPair('ed448');
    const jwt = forged({ alg: 'EdDSA', typ: 'dpop+jwt', jwk: ed448.jwk }, claims(), (input) =>
      nodeSign(null, input, ed448.privateKey),
    );
    expect(refused(jwt).message).toMatch(/signature or jwk/);
  });

  it('refuses a jwk whose point is not on its curve, or whose members say another use, alg or operation', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const bad = [
      { ...k.jwk, y: k.jwk.x },
      { ...k.jwk, use: 'enc' },
      { ...k.jwk, alg: 'ES384' },
      { ...k.jwk, key_ops: ['sign'] },
      { ...k.jwk, ext: 'yes' },
      { ...k.jwk, x: `AA${k.jwk.x}` },
    ];
    for (const jwk of bad) {
      const jwt = forged({ alg: 'ES256', typ: 'dpop+jwt', jwk }, claims(), es256(k.privateKey));
      expect(refused(jwt).message).toMatch(/signature or jwk/);
    }
    // The same members, as the RFCs allow them: accepted.
    const ok = { ...k.jwk, use: 'sig', alg: 'ES256', key_ops: ['verify'], ext: true, kid: 'k-1' };
    verify(forged({ alg: 'ES256', typ: 'dpop+jwt', jwk: ok }, claims(), es256(k.privateKey)));
  });

  it('refuses typ application/dpop+jwt, a crit header, an expired exp and a future nbf', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const h = { alg: 'ES256', typ: 'dpop+jwt', jwk: k.jwk };
    const s = es256(k.privateKey);
    expect(refused(forged({ ...h, typ: 'application/dpop+jwt' }, claims(), s)).message).toMatch(/typ/);
    expect(refused(forged({ ...h, crit: ['x'], x: 1 }, claims(), s)).message).toMatch(/signature or jwk/);
    const t = Math.floor(Date.now() / 1000);
    expect(refused(forged(h, claims({ exp: t - 10 }), s)).message).toMatch(/signature or jwk/);
    expect(refused(forged(h, claims({ nbf: t + 600 }), s)).message).toMatch(/signature or jwk/);
  });

  it('writes EC and OKP keys into the same SPKI node:crypto exports', () => {
    for (const [alg, k] of [
      ['ES256', keyPair('ec', { namedCurve: 'P-256' })],
      ['ES384', keyPair('ec', { namedCurve: 'P-384' })],
      ['EdDSA', keyPair('ed25519')],
      ['RS256', keyPair('rsa', { modulusLength: 2048 })],
    ] as const) {
      const pem = embeddedJwkPem(alg, k.jwk as Record<string, unknown>);
      expect(pem).toBe(k.publicKey.export({ type: 'spki', format: 'pem' }));
    }
  });

  it('checks the server alg list for a key already held', () => {
    const k = keyPair('ec', { namedCurve: 'P-256' });
    const h = { alg: 'ES256', typ: 'dpop+jwt', jwk: k.jwk };
    verify(forged(h, claims(), es256(k.privateKey)));
    expect(refused(forged(h, claims(), es256(k.privateKey)), { algorithms: ['EdDSA'] }).message).toMatch(
      /alg/,
    );
  });
});

describe('jwkThumbprint (RFC 7638)', () => {
  it('gives RFC 7638 §3.1 example thumbprint', () => {
    const jwk = {
      kty: 'RSA',
      n: '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw',
      e: 'AQAB',
      alg: 'RS256',
      kid: '2011-04-29',
    };
    expect(jwkThumbprint(jwk)).toBe('NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs');
  });

  it('agrees with jose for EC, OKP and RSA keys, whatever other members they carry', async () => {
    for (const alg of ['ES256', 'ES384', 'EdDSA', 'RS256'] as const) {
      const { publicKey } = await generateKeyPair(alg, { extractable: true });
      const jwk = { ...(await exportJWK(publicKey)), kid: 'x', use: 'sig' };
      expect(jwkThumbprint(jwk)).toBe(await calculateJwkThumbprint(jwk, 'sha256'));
    }
  });
});

describe('DpopNonces', () => {
  it('accepts the current and the previous bucket, from any replica with the same key, and nothing older', () => {
    let t = NOW * 1000;
    const a = new DpopNonces('shared-key-0123456789', { bucketSeconds: 300, now: () => t });
    const b = new DpopNonces('shared-key-0123456789', { bucketSeconds: 300, now: () => t });
    const n = a.issueNonce();
    expect(b.nonceValid(n)).toBe(true);
    expect(new DpopNonces('another-key-012345678', { now: () => t }).nonceValid(n)).toBe(false);
    t += 300_000;
    expect(b.nonceValid(n)).toBe(true);
    t += 300_000;
    expect(b.nonceValid(n)).toBe(false);
    expect(b.nonceValid('')).toBe(false);
  });
});

describe('MemoryDpopReplayStore', () => {
  it('says first use once per (jti, key), again after the ttl', async () => {
    let t = 0;
    const s = new MemoryDpopReplayStore(() => t);
    expect(await s.firstUse('j', 'k1', 60)).toBe(true);
    expect(await s.firstUse('j', 'k1', 60)).toBe(false);
    expect(await s.firstUse('j', 'k2', 60)).toBe(true);
    t = 61_000;
    expect(await s.firstUse('j', 'k1', 60)).toBe(true);
  });

  it('keys Redis entries under platform:dpop:jti: with a hash', () => {
    expect(dpopJtiKey('j', 'k')).toMatch(/^platform:dpop:jti:[0-9a-f]{64}$/);
    expect(normaliseHtu('ftp://x/')).toBeUndefined();
  });
});

describe('RedisDpopReplayStore', () => {
  it('says first use once per (jti, key) for every client of the same Redis, with the ttl set', async () => {
    const r1 = new Redis(inject('redisUrl'));
    const r2 = new Redis(inject('redisUrl'));
    try {
      const jti = crypto.randomUUID();
      expect(await new RedisDpopReplayStore(r1).firstUse(jti, 'k', 60)).toBe(true);
      expect(await new RedisDpopReplayStore(r2).firstUse(jti, 'k', 60)).toBe(false);
      const ttl = await r1.ttl(dpopJtiKey(jti, 'k'));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60);
      await r1.del(dpopJtiKey(jti, 'k'));
    } finally {
      r1.disconnect();
      r2.disconnect();
    }
  });
});
