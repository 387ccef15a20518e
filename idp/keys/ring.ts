import type { Pool } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';
import type { RedisClient } from '../../lib/redis/client.ts';
import type { IdpConfig } from '../config.ts';
import { OAuthError } from '../errors.ts';
import type { JwtSigner } from '../tokens/jwt.ts';
import type { SigningKey } from '../tokens/keys.ts';
import type { KeyState } from './schedule.ts';
import type { KeyOrigin } from './store.ts';

// The key ring's interface: what the token endpoint, the key set and the admin API ask of the signing keys,
// whether they are configured (index.ts, static) or rotated by the provider itself (rotating.ts).

/** Who a key event is recorded for in the admin audit: the administrator, or the provider's own schedule. */
export interface KeyActor {
  email: string;
  sub: string;
  clientId?: string;
  requestId?: string;
}
export const SCHEDULE_ACTOR: KeyActor = Object.freeze({ email: 'system', sub: 'platform-idp' });

/** One key as GET /admin/api/keys lists it. Times are ISO 8601; null when not (yet) applicable. */
export interface KeyListing {
  kid: string;
  alg: 'RS256';
  state: KeyState;
  signing: boolean;
  origin: KeyOrigin | 'configured';
  published_since: string | null;
  activated_at: string | null;
  retired_at: string | null;
  unpublish_at: string | null;
  withdrawn_at: string | null;
}

export interface RotationOutcome {
  kid: string;
  /** False when a planned rotation found a next key already published (it is answered instead). */
  created: boolean;
  emergency: boolean;
  publish_at: string;
  activate_at: string;
  withdrawn: string[];
}

/** The provider's signing keys: which one signs now, which are published, and (with rotation) changing them. */
export interface KeyRing {
  readonly rotation: boolean;
  /** The signer of the current key; cheap (no I/O), called for every token. */
  signer(): JwtSigner;
  /** The keys a token of ours verifies under now. */
  published(): readonly SigningKey[];
  /** The JWKS document and its Cache-Control max-age. */
  jwks(): { body: string; maxAge: number };
  listing(): Promise<KeyListing[]>;
  rotate(emergency: boolean, actor: KeyActor): Promise<RotationOutcome>;
  close(): void;
}

export class RotationOffError extends OAuthError {
  constructor() {
    super(
      'rotation_off',
      'signing-key rotation is off (PLATFORM_KEY_ROTATION is not auto): change PLATFORM_OIDC_PRIVATE_KEY to rotate',
      409,
    );
  }
}

export const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
export const jwksBody = (keys: readonly SigningKey[]) =>
  JSON.stringify({ keys: keys.map((k) => k.publicJwk) });

export interface KeyRingDeps {
  config: IdpConfig;
  pool: Pool;
  /** Notices to the other replicas and the gateways; undefined (platform dev): the poll alone. */
  redis: RedisClient | undefined;
  log: Logger;
}
