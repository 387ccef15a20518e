// The unit DPoP's cost is judged in (docs/gateway.md § What DPoP costs): the CPU of one ES256 signature
// verification with node:crypto, measured in the calling process (same Node, same OpenSSL, same neighbours) over a
// DPoP-proof-sized signing input, the same public KeyObject reused — what a verifier that imported its key once pays.
import { generateKeyPairSync, sign, verify } from 'node:crypto';

/** CPU µs (user + system) per node:crypto ES256 verification, after a warm-up, over `n` verifications. */
export function es256VerifyMicros(n = 5000): number {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  // A proof's signing input: base64url header (alg, typ, P-256 jwk) and claims (jti, htm, htu, iat, ath), ~400 bytes.
  const data = Buffer.from('x'.repeat(400));
  const signature = sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  const key = { key: publicKey, dsaEncoding: 'ieee-p1363' } as const;
  for (let i = 0; i < 300; i++) verify('sha256', data, key, signature); // warm-up
  const cpu0 = process.cpuUsage();
  let ok = true;
  for (let i = 0; i < n; i++) ok = verify('sha256', data, key, signature) && ok;
  const cpu = process.cpuUsage(cpu0);
  if (!ok) throw new Error('ES256 verification failed');
  return (cpu.user + cpu.system) / n;
}
