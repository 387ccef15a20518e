import type { Pool } from '../lib/db.ts';
import type { ReadinessChecks } from '../lib/health.ts';
import type { RevocationPublisher } from '../lib/revocation.ts';
import type { SingleUseStore } from '../lib/single-use.ts';
import type { ClientKeySets } from './client-auth/key-sets.ts';
import type { IdpConfig } from './config.ts';
import type { ConnectionsService } from './connections/service.ts';
import type { IdpDpop } from './dpop/index.ts';
import type { Entitlements } from './entitlements/entitlements.ts';
import type { EntityGrants } from './entity-grants/entity-grants.ts';
import type { Exchange } from './exchange.ts';
import type { KeyRing } from './keys/ring.ts';
import type { IdpMetrics } from './metrics.ts';
import type { OutboundBudget } from './outbound/index.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { RevocationService } from './revocation.ts';
import type { AdminAuditStore } from './store/admin-audit.ts';
import type { BlockStore } from './store/blocks.ts';
import type { ClientStore } from './store/clients.ts';
import type { CodeStore } from './store/codes.ts';
import type { ConsentStore } from './store/consents.ts';
import type { DeviceCodeStore } from './store/device-codes.ts';
import type { RefreshTokenStore } from './store/refresh-tokens.ts';
import type { RefusalStore } from './store/refusals.ts';
import type { SessionStore } from './store/sessions.ts';
import type { TrustedIssuers } from './trusted-issuers/index.ts';

/** Everything an endpoint may use; built once in app.ts, never a module global. */
export interface IdpContext {
  config: IdpConfig;
  /** The signing keys: `keyRing.signer()` signs, `keyRing.published()` verifies (static or rotated). */
  keyRing: KeyRing;
  clients: ClientStore;
  /** private_key_jwt key sets (a client's jwks, or its jwks_uri fetched and cached). */
  clientKeys: ClientKeySets;
  /** The one outbound-fetch budget (idp/outbound): every fetch a request causes goes through it. */
  outbound: OutboundBudget;
  codes: CodeStore;
  consents: ConsentStore;
  deviceCodes: DeviceCodeStore;
  refreshTokens: RefreshTokenStore;
  sessions: SessionStore;
  /** The denylist writer (Redis, or the dev stack's in-process store); revoke through `revocation`. */
  revocations: RevocationPublisher;
  /** Grant, reuse and rate-limit counters; absent when the process serves no metrics. */
  metrics?: IdpMetrics;
  entitlements: Entitlements;
  /** Entity grants, carried in the access token's `ent` claim. */
  entityGrants: EntityGrants;
  /** Every revocation goes through here: recorded in Postgres, then published. */
  revocation: RevocationService;
  adminAudit: AdminAuditStore;
  /** Blocked users (read; block and unblock go through `revocation`). */
  blocks: BlockStore;
  /** Refused grants and consents (the console's chart and the audit's `refused` rows). */
  refusals: RefusalStore;
  rateLimiter: RateLimiter;
  /** For stores the admin API builds over the provider's tables. */
  pool: Pool;
  /** PLATFORM_TRUSTED_ISSUERS_FILE's issuers (assertion grants); undefined: the file is not configured. */
  trustedIssuers?: TrustedIssuers;
  /** Assertion grants' jti, each accepted once across every replica (Redis; memory for `platform dev`). */
  assertionJtis: SingleUseStore;
  /** DPoP proofs (RFC 9449): token endpoint and userinfo (proofs seen in Redis). */
  dpop: IdpDpop;
  /** DPoP proofs at the admin API, seen in Postgres: administrators can revoke while Redis is away. */
  adminDpop: IdpDpop;
  /** PLATFORM_CONNECTIONS_FILE's connections (the exchange grant's `urn:platform:connection:<name>`); undefined: no file. */
  connections?: ConnectionsService;
  /** What `/health/ready` asks: Postgres, and Redis unless `platform dev` gave an in-process store. */
  readiness?: ReadinessChecks;
  /** Key of the consent form's CSRF token, derived from the configured secret (the same on every replica). */
  csrfKey: Buffer;
}

export type { Exchange } from './exchange.ts';

export type Endpoint = (ctx: IdpContext, x: Exchange) => Promise<void>;
