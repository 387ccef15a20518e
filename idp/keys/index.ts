import { ConfigError } from '../../lib/config.ts';
import type { Pool } from '../../lib/db.ts';
import { createKeyPublicationStore } from '../store/signing-keys.ts';
import { JwtSigner } from '../tokens/jwt.ts';
import { loadSigningKeys, type SigningKey } from '../tokens/keys.ts';
import { jwksBody, type KeyRing, type KeyRingDeps, RotationOffError } from './ring.ts';
import { RotatingKeyRing } from './rotating.ts';
import { jwksMaxAge } from './schedule.ts';

export type { KeyRing } from './ring.ts';

/** PLATFORM_KEY_ROTATION=auto → keys from Postgres, rotated; otherwise PLATFORM_OIDC_PRIVATE_KEY as configured. */
export async function createKeyRing(deps: KeyRingDeps): Promise<KeyRing> {
  const { config } = deps;
  if (config.keyRotation) return RotatingKeyRing.start(deps, config.keyRotation);
  const keys = await loadSigningKeys(config.privateKey ?? '').catch((err: Error) => {
    throw new ConfigError('PLATFORM_OIDC_PRIVATE_KEY', err.message);
  });
  await createKeyPublicationStore(deps.pool)
    .record(
      keys.map((k) => k.kid),
      'RS256',
    )
    .catch((err: Error) =>
      deps.log.warn({ err: { message: err.message } }, 'signing keys not recorded (run platform migrate)'),
    );
  return staticKeyRing(keys, deps.pool);
}

function staticKeyRing(keys: readonly SigningKey[], pool: Pool): KeyRing {
  const signer = new JwtSigner(keys[0]!);
  const jwks = { body: jwksBody(keys), maxAge: jwksMaxAge(undefined) };
  return {
    rotation: false,
    signer: () => signer,
    published: () => keys,
    jwks: () => jwks,
    async listing() {
      const since = await createKeyPublicationStore(pool).publishedSince();
      return keys.map((k, i) => ({
        kid: k.kid,
        alg: 'RS256',
        state: i === 0 ? 'current' : 'previous',
        signing: i === 0,
        origin: 'configured',
        published_since: since.get(k.kid)?.toISOString() ?? null,
        activated_at: null,
        retired_at: null,
        unpublish_at: null,
        withdrawn_at: null,
      }));
    },
    rotate: async () => {
      throw new RotationOffError();
    },
    close() {},
  };
}
