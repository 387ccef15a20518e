// The unit DPoP's cost is judged in (docs/gateway.md § What DPoP costs): the CPU of one ES256 signature
// verification with node:crypto, measured in the calling process (same Node, same OpenSSL, same neighbours) over a
// DPoP-proof-sized signing input, the same public KeyObject reused — what a verifier that imported its key once pays.
import { generateKeyPairSync, type KeyObject, sign, verify } from 'node:crypto';

/** CPU µs (user + system) per call of `f`, over `n` calls after a warm-up of 300. */
function cpuMicros(n: number, f: () => boolean): number {
  for (let i = 0; i < 300; i++) f();
  const cpu0 = process.cpuUsage();
  let ok = true;
  for (let i = 0; i < n; i++) ok = f() && ok;
  const cpu = process.cpuUsage(cpu0);
  if (!ok) throw new Error('ES256 verification failed');
  return (cpu.user + cpu.system) / n;
}

/** A P-256 key pair and a proof's signing input: base64url header (alg, typ, jwk) and claims, ~400 bytes. */
function fixture(): { privateKey: KeyObject; publicKey: KeyObject; data: Buffer } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { privateKey, publicKey, data: Buffer.from('x'.repeat(400)) };
}

/**
 * CPU µs (user + system) per node:crypto ES256 verification as a JWS verifier makes it:
 * `crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature)`, after a warm-up, over `n`.
 */
export function es256VerifyMicros(n = 5000): number {
  const { privateKey, publicKey, data } = fixture();
  const signature = sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  const key = { key: publicKey, dsaEncoding: 'ieee-p1363' } as const;
  return cpuMicros(n, () => verify('sha256', data, key, signature));
}

/**
 * The same verification with the KeyObject passed bare and a DER signature: the signature's own cost. Node 24's
 * key preparation tests whether its argument is a KeyObject by catching a thrown TypeError (internal/crypto/keys
 * `isKeyObject`), so an options object `{ key, … }` costs an exception per call, and `ieee-p1363` more again: on the
 * shared 2-core machine ~150 µs bare against ~235 µs for {@link es256VerifyMicros}'s form (docs/gateway.md).
 */
export function es256VerifyBareMicros(n = 5000): number {
  const { privateKey, publicKey, data } = fixture();
  const signature = sign('sha256', data, privateKey);
  return cpuMicros(n, () => verify('sha256', data, publicKey, signature));
}
