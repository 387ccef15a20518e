// The physical cost of a DPoP proof: one ES256 signature verification with node:crypto (P-256, the signature in
// JOSE's raw r‖s form as a proof carries it), over an input the size of a proof's signing input, with one key
// object reused, as a verifier holding the client's key does. CPU µs per verification in the calling process.
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';

export function es256VerifyMicros(n = 5000): number {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const key = createPublicKey(createPrivateKey(privateKey.export({ format: 'pem', type: 'pkcs8' })));
  // A proof's signing input is ~330 bytes (header with the jwk, then jti, htm, htu, iat, ath).
  const input = Buffer.alloc(330, 'a');
  const signature = sign('sha256', input, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  const once = () => {
    if (!verify('sha256', input, { key, dsaEncoding: 'ieee-p1363' }, signature))
      throw new Error('ES256 verify');
  };
  for (let i = 0; i < 500; i++) once();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) once();
  const c = process.cpuUsage(cpu0);
  return (c.user + c.system) / n;
}
