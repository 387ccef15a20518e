import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { deriveKey } from '../keys/crypto.ts';

// A stored upstream grant is sealed with AES-256-GCM under a key derived (HKDF-SHA256, a label of its own) from
// PLATFORM_CONNECTIONS_KEY or the key-rotation encryption key. The additional authenticated data names the user
// and the connection, so a sealed grant copied to another user's row, or to another connection, does not open;
// nor does one with any byte altered. Stored form: version byte 1 ‖ 12-byte IV ‖ ciphertext ‖ 16-byte tag; the
// plaintext is the JSON of SealedGrant.

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What is sealed: everything a decision reads (the plain columns beside it are for listings only). */
export interface SealedGrant {
  accessToken: string;
  refreshToken?: string;
  /** Unix ms; absent when the upstream did not say. */
  expiresAt?: number;
  scope?: string;
  subject?: string;
}

/** The grant does not open: another row's, altered, or sealed under another key. Never used. */
export class GrantSealError extends Error {
  override readonly name = 'GrantSealError';
  constructor(connection: string) {
    super(
      `the stored grant of connection ${connection} does not open: it was altered, copied from another row, or sealed under another key`,
    );
  }
}

function aad(userId: string, connection: string): Buffer {
  return Buffer.from(`platform connection grant v1\n${userId}\n${connection}`, 'utf8');
}

export class GrantSealer {
  readonly #key: Buffer;

  constructor(secret: string) {
    this.#key = deriveKey(secret, 'platform-idp connection grants v1');
  }

  seal(userId: string, connection: string, grant: SealedGrant): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(aad(userId, connection));
    const body = Buffer.concat([cipher.update(JSON.stringify(grant), 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, body, cipher.getAuthTag()]);
  }

  open(userId: string, connection: string, sealed: Buffer): SealedGrant {
    if (sealed.length < 1 + IV_BYTES + TAG_BYTES + 1 || sealed[0] !== VERSION)
      throw new GrantSealError(connection);
    const iv = sealed.subarray(1, 1 + IV_BYTES);
    const tag = sealed.subarray(sealed.length - TAG_BYTES);
    const body = sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES);
    let text: string;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
      decipher.setAAD(aad(userId, connection));
      decipher.setAuthTag(tag);
      text = Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
    } catch {
      throw new GrantSealError(connection);
    }
    const grant = JSON.parse(text) as SealedGrant;
    if (typeof grant.accessToken !== 'string') throw new GrantSealError(connection);
    return grant;
  }
}
