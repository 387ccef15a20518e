import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The published form: public members only, plus kid, alg and use. */
  publicJwk: PublicJwk;
}

export interface PublicJwk {
  kty: 'RSA';
  n: string;
  e: string;
  kid: string;
  alg: 'RS256';
  use: 'sig';
}

export class KeyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyConfigError';
  }
}

/** A SigningKey from an RSA private key (2048 bits or more); `kid` defaults to the RFC 7638 thumbprint. */
export async function fromKeyObject(privateKey: KeyObject, kid: string | undefined): Promise<SigningKey> {
  if (privateKey.type !== 'private') throw new KeyConfigError('is a public key; a private key is required');
  if (privateKey.asymmetricKeyType !== 'rsa') {
    throw new KeyConfigError(`must be an RSA key for RS256, got ${privateKey.asymmetricKeyType}`);
  }
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < 2048)
    throw new KeyConfigError(`RSA key of ${bits} bits is too short (RFC 7518 §3.3: at least 2048)`);
  const publicKey = createPublicKey(privateKey);
  const jwk = publicKey.export({ format: 'jwk' }) as JsonWebKey;
  const id = kid ?? (await calculateJwkThumbprint({ kty: 'RSA', n: jwk.n!, e: jwk.e! }));
  return {
    kid: id,
    privateKey,
    publicKey,
    publicJwk: { kty: 'RSA', n: jwk.n!, e: jwk.e!, kid: id, alg: 'RS256', use: 'sig' },
  };
}

function fromJwk(value: unknown, where: string): Promise<SigningKey> {
  if (typeof value !== 'object' || value === null) throw new KeyConfigError(`${where} is not a JWK object`);
  const jwk = value as JsonWebKey & { kid?: unknown; alg?: unknown };
  if (jwk.kty !== 'RSA') throw new KeyConfigError(`${where} must be an RSA JWK (kty "RSA")`);
  if (!jwk.d) throw new KeyConfigError(`${where} has no private member "d"`);
  if (jwk.alg !== undefined && jwk.alg !== 'RS256')
    throw new KeyConfigError(`${where} has alg ${String(jwk.alg)}, not RS256`);
  if (jwk.kid !== undefined && (typeof jwk.kid !== 'string' || jwk.kid === '')) {
    throw new KeyConfigError(`${where} has an invalid kid`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: jwk, format: 'jwk' });
  } catch (err) {
    throw new KeyConfigError(`${where} is not a usable private JWK: ${(err as Error).message}`);
  }
  return fromKeyObject(key, jwk.kid as string | undefined);
}

/**
 * Parses PLATFORM_OIDC_PRIVATE_KEY: a PKCS8 PEM, one private JWK, or a JSON array of private JWKs for
 * rotation — the first signs, every one is published. kids default to the RFC 7638 thumbprint.
 */
export async function loadSigningKeys(text: string): Promise<SigningKey[]> {
  const t = text.trim();
  let keys: SigningKey[];
  if (t.startsWith('-----BEGIN')) {
    if (!t.includes('PRIVATE KEY-----')) throw new KeyConfigError('PEM must be a private key (PKCS8)');
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: t.replace(/\\n/g, '\n'), format: 'pem' });
    } catch (err) {
      throw new KeyConfigError(`PEM could not be read: ${(err as Error).message}`);
    }
    keys = [await fromKeyObject(key, undefined)];
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(t);
    } catch {
      throw new KeyConfigError('is neither a PEM private key nor JSON (a JWK or an array of JWKs)');
    }
    if (Array.isArray(parsed)) {
      if (parsed.length === 0) throw new KeyConfigError('JWK array is empty');
      keys = await Promise.all(parsed.map((k, i) => fromJwk(k, `JWK #${i + 1}`)));
    } else if (parsed && typeof parsed === 'object' && Array.isArray((parsed as { keys?: unknown }).keys)) {
      const list = (parsed as { keys: unknown[] }).keys;
      if (list.length === 0) throw new KeyConfigError('JWK set is empty');
      keys = await Promise.all(list.map((k, i) => fromJwk(k, `JWK #${i + 1}`)));
    } else {
      keys = [await fromJwk(parsed, 'JWK')];
    }
  }
  const seen = new Set<string>();
  for (const k of keys) {
    if (seen.has(k.kid)) throw new KeyConfigError(`kid "${k.kid}" appears twice`);
    seen.add(k.kid);
  }
  return keys;
}
