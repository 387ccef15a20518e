import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

// The private parts of rotated signing keys are stored encrypted (docs/idp.md § Signing-key rotation):
// AES-256-GCM under a key derived with HKDF-SHA256 from PLATFORM_KEY_ENCRYPTION_KEY. The kid is the
// additional authenticated data, so a ciphertext moved to another row does not decrypt. Stored form:
// version byte 1 ‖ 12-byte IV ‖ ciphertext ‖ 16-byte tag.

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const SALT = 'platform-idp';

export class KeyDecryptionError extends Error {
  constructor(kid: string, what = 'does not decrypt') {
    super(
      `the stored private key of "${kid}" ${what}: a different PLATFORM_KEY_ENCRYPTION_KEY sealed it, or it was altered`,
    );
    this.name = 'KeyDecryptionError';
  }
}

/** HKDF-SHA256 of the secret under `label`: 32 bytes, a different key for every use. */
export function deriveKey(secret: string, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), SALT, label, 32));
}

export class KeySealer {
  readonly #key: Buffer;

  constructor(secret: string) {
    this.#key = deriveKey(secret, 'platform-idp signing-key encryption v1');
  }

  seal(kid: string, plaintext: Buffer): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(kid, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, body, cipher.getAuthTag()]);
  }

  /** The plaintext, or KeyDecryptionError for a wrong key, another row's ciphertext or any altered byte. */
  open(kid: string, sealed: Buffer): Buffer {
    if (sealed.length < 1 + IV_BYTES + TAG_BYTES + 1 || sealed[0] !== VERSION)
      throw new KeyDecryptionError(kid);
    const iv = sealed.subarray(1, 1 + IV_BYTES);
    const tag = sealed.subarray(sealed.length - TAG_BYTES);
    const body = sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
      decipher.setAAD(Buffer.from(kid, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(body), decipher.final()]);
    } catch {
      throw new KeyDecryptionError(kid);
    }
  }
}

/** A key's schedule as the MAC covers it (times in ms since the epoch). */
export interface ScheduleFields {
  kid: string;
  publishAt: number;
  activateAt: number;
  withdrawnAt: number | undefined;
}

/**
 * The schedule's seal (migration 140): HMAC-SHA256 under a key derived from PLATFORM_KEY_ENCRYPTION_KEY over the
 * kid and the three times, so whoever can write the table but lacks the secret cannot re-publish a withdrawn key
 * or move a key's activation (the private key's own seal covers only the kid).
 */
export class ScheduleMac {
  readonly #key: Buffer;

  constructor(secret: string) {
    this.#key = deriveKey(secret, 'platform-idp signing-key schedule mac v1');
  }

  mac(f: ScheduleFields): Buffer {
    return createHmac('sha256', this.#key)
      .update(`v1\n${f.kid}\n${f.publishAt}\n${f.activateAt}\n${f.withdrawnAt ?? ''}`)
      .digest();
  }

  valid(f: ScheduleFields, mac: Buffer): boolean {
    const want = this.mac(f);
    return mac.length === want.length && timingSafeEqual(mac, want);
  }
}
