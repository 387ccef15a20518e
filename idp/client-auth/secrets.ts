import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

// Client secrets: 32 random bytes, stored only as their SHA-256 (a slow hash adds nothing to 256 bits of
// randomness), compared in constant time.

export function hashClientSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}

export function newClientSecret(): { secret: string; hash: string } {
  const secret = randomBytes(32).toString('base64url');
  return { secret, hash: hashClientSecret(secret) };
}

export function secretMatches(storedHash: string, presented: string): boolean {
  const a = Buffer.from(storedHash, 'base64url');
  const b = Buffer.from(hashClientSecret(presented), 'base64url');
  return a.length === b.length && timingSafeEqual(a, b);
}
