import { encodeEntitlements } from '../../lib/identity.ts';
import type { EntraTrust, PlatformTrust, ServiceConfig } from '../config.ts';
import { InvalidTokenError, KeysUnavailableError } from '../errors.ts';
import type { KeySet } from '../jwks/key-set.ts';
import {
  actorsOf,
  checkRegisteredClaims,
  confirmationJkt,
  emailOf,
  entraEmailOf,
  headerClaim,
} from './claims.ts';
import { checkHeader, type DecodedJws, decodeJws, verifyHs256, verifyRs256 } from './jws.ts';
import type { TokenCache } from './token-cache.ts';
import type { VerifiedToken } from './verified-token.ts';

export interface TokenVerifierDeps {
  platform: { trust: PlatformTrust; keys: KeySet } | undefined;
  entra: { trust: EntraTrust; v2Keys: KeySet; v1Keys: KeySet } | undefined;
  cache: TokenCache;
}

export type VerifyToken = (token: string, service: ServiceConfig) => VerifiedToken | Promise<VerifiedToken>;

const MAX_KID_LENGTH = 256;

function shown(v: string): string {
  return JSON.stringify(v.length > 120 ? `${v.slice(0, 120)}…` : v);
}

/**
 * Verifies a bearer for one service: signature, issuer and time validity (cached per token), dispatching on
 * the unverified `iss` to exactly one trust path. Audience, scope and revocation are the caller's next steps
 * (auth/access.ts, revocation/), because they must run on every request, cached token or not.
 */
export function createTokenVerifier(deps: TokenVerifierDeps): VerifyToken {
  const { platform, entra, cache } = deps;

  async function withKeySet(jws: DecodedJws, keys: KeySet): Promise<void> {
    checkHeader(jws.header, 'RS256');
    const kid = jws.header.kid;
    if (typeof kid !== 'string' || kid === '' || kid.length > MAX_KID_LENGTH) {
      throw new InvalidTokenError('invalid_kid', 'token header has no usable kid');
    }
    let key = keys.key(kid);
    if (key instanceof Promise) key = await key;
    if (key === undefined) {
      if (!keys.loaded) {
        throw new KeysUnavailableError(
          'jwks_unavailable',
          `the key set of ${keys.issuer} could not be fetched; retry shortly`,
        );
      }
      throw new InvalidTokenError('unknown_kid', `no key with kid ${shown(kid)} in the issuer's key set`);
    }
    if (!verifyRs256(jws, key))
      throw new InvalidTokenError('invalid_signature', 'token signature is invalid');
  }

  async function verifyUncached(token: string, service: ServiceConfig, now: number): Promise<VerifiedToken> {
    const jws = decodeJws(token);
    const { header, payload } = jws;
    const iss = payload.iss;
    if (typeof iss !== 'string') throw new InvalidTokenError('missing_claim', 'token has no iss claim');
    let verified: Omit<
      VerifiedToken,
      'iss' | 'sub' | 'aud' | 'exp' | 'iat' | 'jkt' | 'entitlements' | 'actors' | 'actor'
    >;
    if (platform && iss === platform.trust.issuer) {
      await withKeySet(jws, platform.keys);
      const scope = headerClaim(payload, 'scope');
      verified = {
        kind: 'platform',
        scope,
        scopes: splitScope(scope),
        clientId: headerClaim(payload, 'client_id', 'azp'),
        jti: headerClaim(payload, 'jti'),
        oid: '',
        email: emailOf(payload),
      };
    } else if (
      entra &&
      service.entraClientId !== undefined &&
      (iss === entra.trust.v2Issuer || iss === entra.trust.v1Issuer)
    ) {
      // Graph access tokens carry a `nonce` in the header and are not meant to be verified by anyone but Graph.
      if (header.nonce !== undefined) {
        throw new InvalidTokenError(
          'unsupported_token',
          'token header carries a nonce (a Microsoft Graph token, not one for this resource)',
        );
      }
      await withKeySet(jws, iss === entra.trust.v2Issuer ? entra.v2Keys : entra.v1Keys);
      const scope = headerClaim(payload, 'scp');
      verified = {
        kind: 'entra',
        scope,
        scopes: splitScope(scope),
        // v2 tokens name the client in `azp`, v1 tokens in `appid`.
        clientId: headerClaim(payload, 'azp', 'appid'),
        // Entra's token id is `uti` (docs/gateway.md § Bearer validation).
        jti: headerClaim(payload, 'uti'),
        oid: headerClaim(payload, 'oid'),
        email: entraEmailOf(payload),
      };
    } else if (service.sharedSecret !== undefined && iss === service.name) {
      checkHeader(header, 'HS256');
      if (!verifyHs256(jws, service.sharedSecret))
        throw new InvalidTokenError('invalid_signature', 'token signature is invalid');
      const scope = headerClaim(payload, 'scope');
      verified = {
        kind: 'service',
        scope,
        scopes: splitScope(scope),
        clientId: headerClaim(payload, 'client_id', 'azp'),
        jti: headerClaim(payload, 'jti'),
        oid: '',
        email: emailOf(payload),
      };
    } else {
      throw new InvalidTokenError(
        'unknown_issuer',
        `token issuer ${shown(iss)} is not trusted by this service`,
      );
    }
    const claims = checkRegisteredClaims(payload, now);
    // Delegation (`act`) is the platform IdP's claim only, like `ent`.
    const actors = verified.kind === 'platform' ? actorsOf(payload) : [];
    const result: VerifiedToken = {
      ...verified,
      ...claims,
      jkt: confirmationJkt(payload),
      // Entity grants are the platform IdP's claim only.
      entitlements: verified.kind === 'platform' ? encodeEntitlements(payload.ent) : '',
      actors,
      actor: actors[0] ?? '',
    };
    cache.set(token, result, now);
    return result;
  }

  return (token, service) => {
    const now = Date.now() / 1000;
    const hit = cache.get(token, now);
    return hit ?? verifyUncached(token, service, now);
  };
}

function splitScope(scope: string): string[] {
  return scope === '' ? [] : scope.split(' ').filter((s) => s !== '');
}
