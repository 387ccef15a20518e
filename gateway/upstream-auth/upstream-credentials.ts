import { identityValueSha256 } from '../../lib/identity.ts';
import type { Logger } from '../../lib/logger.ts';
import type { VerifiedToken } from '../auth/verified-token.ts';
import type { ServiceConfig } from '../config.ts';
import { ConnectionRequiredError, ConnectionUnavailableError } from '../errors.ts';
import type { RevocationCheck } from '../revocation/mirror.ts';
import type { ExchangeOutcome, ExchangeToken } from './exchange.ts';
import { cacheKey, type TokenOwner, type UpstreamTokenCache } from './token-cache.ts';

/** The user's upstream token for one request, and how to forget it when the upstream refuses it. */
export interface UpstreamCredential {
  /** A secret: never logged. */
  readonly token: string;
  /** The token's hex SHA-256, the line identity v4 signs for it (held with the cached token: hashed once). */
  readonly sha256: string;
  /** The cache entry it came from (or went into). */
  readonly key: string;
}

/**
 * The credential for a request to a service with an upstream connection: from the cache when held (synchronous,
 * the hot path), else by one exchange per user, connection and actor chain however many requests wait for it.
 * Throws (or rejects with) ConnectionUnavailableError for a token that is not the platform's,
 * ConnectionRequiredError when the user has not connected, and the exchange's own refusals.
 */
export type ObtainCredential = (
  service: ServiceConfig,
  subjectToken: string,
  t: VerifiedToken,
) => UpstreamCredential | Promise<UpstreamCredential>;

export interface UpstreamCredentialsDeps {
  exchange: ExchangeToken;
  cache: UpstreamTokenCache;
  /** The gateway's revocation view: an entry obtained at or before the user's cut-off is never served. */
  revocation: RevocationCheck;
  /** PLATFORM_ISSUER: the connect page is `{issuer}/connections/<name>` when the IdP names none. */
  issuer: string;
  log: Logger;
  now?: () => number;
}

type Pending = Promise<ExchangeOutcome & { obtainedAt: number }>;

/** Only the platform IdP can exchange, and only its own tokens (RFC 8693 subject_token): checked before the body is read. */
export function checkExchangeable(service: ServiceConfig, t: VerifiedToken): void {
  if (t.kind !== 'platform') {
    throw new ConnectionUnavailableError(
      'token_not_exchangeable',
      `${service.name} acts as you on ${service.upstreamConnection}: sign in with the platform (only platform tokens can be exchanged)`,
    );
  }
}

export function createUpstreamCredentials(deps: UpstreamCredentialsDeps): {
  obtain: ObtainCredential;
  /** Forgets a token the upstream answered 401 to; the next request exchanges afresh. */
  refused(credential: UpstreamCredential): void;
} {
  const { exchange, cache, revocation, log } = deps;
  const now = deps.now ?? Date.now;
  const issuer = deps.issuer.replace(/\/$/, '');
  /** One exchange in flight per key: concurrent requests of one user share it (single flight). */
  const inflight = new Map<string, Pending>();

  function start(key: string, subjectToken: string, connection: string): Pending {
    let p = inflight.get(key);
    if (p === undefined) {
      const obtainedAt = Math.floor(now() / 1000);
      p = exchange(subjectToken, connection).then((outcome) => ({ ...outcome, obtainedAt }));
      inflight.set(key, p);
      const done = () => {
        if (inflight.get(key) === p) inflight.delete(key);
      };
      p.then(done, done);
    }
    return p;
  }

  const obtain: ObtainCredential = (service, subjectToken, t) => {
    const connection = service.upstreamConnection!;
    checkExchangeable(service, t);
    const owner: TokenOwner = { connection, sub: t.sub, email: t.email, actors: t.actors };
    const key = cacheKey(owner);
    const hit = cache.get(key, now());
    if (hit !== undefined) {
      // A cut-off of the user (revoke-user, block) or of an actor at or after the exchange: never served again.
      const status = revocation.check({
        jti: '',
        sub: hit.sub,
        oid: '',
        email: hit.email,
        actors: hit.actors,
        iat: hit.obtainedAt,
      });
      if (status !== 'revoked') return { token: hit.token, sha256: hit.sha256, key };
      cache.drop(key, hit.token);
    }
    return start(key, subjectToken, connection).then((outcome) => {
      if (outcome.kind === 'not_connected') {
        throw new ConnectionRequiredError(
          connection,
          outcome.connectUri ?? `${issuer}/connections/${connection}`,
          service.name,
        );
      }
      cache.set(key, owner, outcome.accessToken, outcome.expiresIn, outcome.obtainedAt);
      log.debug(
        { connection, service: service.name, expiresIn: outcome.expiresIn },
        'upstream token exchanged',
      );
      return { token: outcome.accessToken, sha256: identityValueSha256(outcome.accessToken), key };
    });
  };

  return {
    obtain,
    refused(credential) {
      cache.drop(credential.key, credential.token);
    },
  };
}
