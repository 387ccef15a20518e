// RFC 8628 codes: the device code (a bearer secret the device polls with) and the user code a person types.
import { createHash, randomBytes, randomInt } from 'node:crypto';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** No vowels (no words), no easily confused letters: RFC 8628 §6.1's example alphabet. */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;

export function newDeviceCode(): string {
  return randomBytes(32).toString('base64url');
}

/** Eight characters of the alphabet, shown as `XXXX-XXXX`. */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return formatUserCode(code);
}

export function formatUserCode(normalized: string): string {
  return `${normalized.slice(0, 4)}-${normalized.slice(4)}`;
}

/**
 * What a person typed, in the one form codes are hashed in: case-insensitive, the hyphen (and spaces)
 * optional. Undefined when it cannot be a user code at all.
 */
export function normalizeUserCode(typed: string): string | undefined {
  const s = typed.toUpperCase().replace(/[\s-]/g, '');
  if (s.length !== USER_CODE_LENGTH) return undefined;
  for (const c of s) if (!USER_CODE_ALPHABET.includes(c)) return undefined;
  return s;
}

export function hashDeviceSecret(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}
