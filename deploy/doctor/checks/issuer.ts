import type { Probe } from '../http.ts';
import { type CheckRow, fail, pass, skip } from '../result.ts';
import { describeResponse, guarded } from './target.ts';

const ENTRA = /^https:\/\/login\.microsoftonline\.com\//;
// Members only a private JWK has (RFC 7518 §6.3.2, §6.4): a published key set must never carry them.
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * For one authorization server named by the metadata: its discovery document answers and names itself, and
 * its key set (JWKS) answers with public keys only. The spec's #7 (the gateway's own key-set fetch) is in the
 * gateway's log; this is the part of it visible from outside.
 */
export async function checkIssuer(probe: Probe, issuer: string): Promise<CheckRow[]> {
  const discoveryId = { ref: '-', subject: 'issuer', name: 'discovery metadata' };
  const jwksId = { ref: '-', subject: 'issuer', name: 'key set (JWKS)' };
  let jwksUri: string | undefined;
  const discovery = await guarded(discoveryId, async () => {
    const url = `${issuer}/.well-known/openid-configuration`;
    const res = await probe(url);
    if (res.status !== 200)
      return fail(discoveryId, `GET ${url} answered ${describeResponse(res)}, expected 200`);
    const doc = res.json as Record<string, unknown> | undefined;
    if (typeof doc !== 'object' || doc === null) return fail(discoveryId, `GET ${url}: the body is not JSON`);
    const problems: string[] = [];
    // RFC 8414 §3.3 / OIDC Discovery §4.3: the document must name exactly the issuer it was fetched for.
    if (doc.issuer !== issuer) problems.push(`issuer is ${JSON.stringify(doc.issuer)}, expected "${issuer}"`);
    if (typeof doc.jwks_uri === 'string' && /^https?:\/\//.test(doc.jwks_uri)) jwksUri = doc.jwks_uri;
    else problems.push('jwks_uri is missing');
    // The platform issuer's discovery must carry S256 (spec: discovery metadata); Entra does not list it.
    const methods = doc.code_challenge_methods_supported;
    if (!ENTRA.test(issuer) && !(Array.isArray(methods) && methods.includes('S256'))) {
      problems.push('code_challenge_methods_supported lacks S256');
    }
    if (problems.length > 0) return fail(discoveryId, `${url}: ${problems.join('; ')}`);
    return pass(discoveryId, `200 from ${url}`);
  });
  if (jwksUri === undefined) {
    return [discovery, skip(jwksId, `${issuer}: no jwks_uri (discovery did not pass)`)];
  }
  const uri = jwksUri;
  const jwks = await guarded(jwksId, async () => {
    const res = await probe(uri);
    if (res.status !== 200) return fail(jwksId, `GET ${uri} answered ${describeResponse(res)}, expected 200`);
    const keys = (res.json as { keys?: unknown } | undefined)?.keys;
    if (!Array.isArray(keys) || keys.length === 0) return fail(jwksId, `GET ${uri}: no keys`);
    const problems: string[] = [];
    const kids: string[] = [];
    for (const k of keys as Array<Record<string, unknown>>) {
      if (typeof k?.kid !== 'string' || typeof k.kty !== 'string') problems.push('a key lacks kid or kty');
      else kids.push(k.kid);
      if (PRIVATE_MEMBERS.some((m) => k?.[m] !== undefined))
        problems.push(`key ${String(k?.kid)} publishes private members`);
    }
    if (!keys.some((k: Record<string, unknown>) => k?.kty === 'RSA'))
      problems.push('no RSA key (tokens are RS256)');
    if (problems.length > 0) return fail(jwksId, `${uri}: ${problems.join('; ')}`);
    return pass(jwksId, `200 from ${uri}; ${kids.length} key(s): ${kids.join(', ')}`);
  });
  return [discovery, jwks];
}
