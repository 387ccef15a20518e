import { type CheckRow, fail, pass } from '../result.ts';
import { describeResponse, guarded, metadataUrlOf, resourceOf, type ServiceTarget } from './target.ts';

export interface MetadataOutcome {
  row: CheckRow;
  /** The authorization servers the metadata names (for the issuer checks); empty when it could not be read. */
  authorizationServers: readonly string[];
}

// Entra's v2 issuer; a service that trusts it must also offer its delegated scope (docs/reference.md).
const ENTRA_V2_ISSUER = /^https:\/\/login\.microsoftonline\.com\/[^/]+\/v2\.0$/;

/**
 * #3: RFC 9728 metadata at `{base_url}/<SERVICE>/.well-known/oauth-protected-resource`, 200, naming the
 * resource `{base_url}/<SERVICE>/mcp`, at least one issuer, and the scopes each issuer grants for the service.
 */
export async function checkMetadata(t: ServiceTarget): Promise<MetadataOutcome> {
  const id = { ref: '#3', subject: t.service, name: 'protected-resource metadata' };
  const url = metadataUrlOf(t);
  let authorizationServers: string[] = [];
  const row = await guarded(id, async () => {
    const res = await t.probe(url);
    if (res.status !== 200) return fail(id, `GET ${url} answered ${describeResponse(res)}, expected 200`);
    const doc = res.json;
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
      return fail(id, `GET ${url}: the body is not a JSON object`);
    }
    const m = doc as Record<string, unknown>;
    const problems: string[] = [];
    const resource = resourceOf(t);
    if (m.resource !== resource)
      problems.push(`resource is ${JSON.stringify(m.resource)}, expected "${resource}"`);
    const servers = stringArray(m.authorization_servers);
    if (servers === undefined || servers.length === 0) {
      problems.push('authorization_servers names no issuer');
    } else {
      const bad = servers.filter((s) => !isHttpUrl(s));
      if (bad.length > 0) problems.push(`authorization_servers has non-URL entries: ${bad.join(', ')}`);
      authorizationServers = servers.filter(isHttpUrl);
    }
    const scopes = stringArray(m.scopes_supported) ?? [];
    if (!scopes.includes(`mcp:${t.service}`)) problems.push(`scopes_supported lacks mcp:${t.service}`);
    if (servers?.some((s) => ENTRA_V2_ISSUER.test(s)) && !scopes.includes(`${resource}/mcp.access`)) {
      problems.push(`Entra is trusted but scopes_supported lacks ${resource}/mcp.access`);
    }
    const methods = stringArray(m.bearer_methods_supported);
    if (methods !== undefined && !methods.includes('header')) {
      problems.push('bearer_methods_supported does not include "header"');
    }
    if (problems.length > 0) return fail(id, `${url}: ${problems.join('; ')}`);
    return pass(id, `200; issuers ${servers!.join(', ')}; scopes ${scopes.join(' ')}`);
  });
  return { row, authorizationServers };
}

function stringArray(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'https:' || u.protocol === 'http:';
  } catch {
    return false;
  }
}
