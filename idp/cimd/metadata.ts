import { z } from 'zod';
import { checkKeySet } from '../client-auth/key-sets.ts';
import { InvalidClientError } from '../errors.ts';

// Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document): a client_id that is an https
// URL names a JSON document describing the client. These are the rules for the URL and for the document.

export const MAX_CLIENT_ID_LENGTH = 2048;

/** True for a client_id that names a metadata document (and so is fetched instead of looked up). */
export function isMetadataClientId(clientId: string): boolean {
  return clientId.startsWith('https://');
}

/**
 * The URL rules: https, a path other than `/`, no userinfo, no fragment, and written in its normal form
 * (so dot segments, an upper-case host or an explicit :443 are refused: the client_id is compared as a string).
 */
export function parseClientIdUrl(clientId: string): URL {
  if (clientId.length > MAX_CLIENT_ID_LENGTH) throw new InvalidClientError('client_id URL is too long');
  let u: URL;
  try {
    u = new URL(clientId);
  } catch {
    throw new InvalidClientError('client_id is not a valid URL');
  }
  if (u.protocol !== 'https:') throw new InvalidClientError('a client_id URL must be https');
  if (u.username || u.password) throw new InvalidClientError('a client_id URL must not carry userinfo');
  if (clientId.includes('#')) throw new InvalidClientError('a client_id URL must not carry a fragment');
  if (u.pathname === '/' || u.pathname === '')
    throw new InvalidClientError('a client_id URL must have a path');
  if (u.href !== clientId)
    throw new InvalidClientError('a client_id URL must be in normal form (no dot segments, lower-case host)');
  return u;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** RFC 8252 §7.3 loopback redirect: http, a loopback host, any port and path, no userinfo or fragment. */
function isLoopbackRedirect(u: URL, raw: string): boolean {
  return (
    u.protocol === 'http:' &&
    LOOPBACK_HOSTS.has(u.hostname) &&
    !u.username &&
    !u.password &&
    !raw.includes('#')
  );
}

const Document = z.looseObject({
  client_id: z.string(),
  client_name: z.string().max(200).optional(),
  redirect_uris: z.array(z.string().max(2048)).min(1).max(20),
  token_endpoint_auth_method: z.string().optional(),
  grant_types: z.array(z.string()).optional(),
  response_types: z.array(z.string()).optional(),
});

export interface MetadataClient {
  clientId: string;
  /** client_name, else the document's host. */
  name: string;
  redirectUris: string[];
  /** The host (and port, when not 443) that serves the document: what the consent page names. */
  host: string;
  metadata: Record<string, unknown>;
}

/** Checks a fetched document against the URL it came from; any failure is `invalid_client`. */
export function validateMetadata(url: URL, body: unknown): MetadataClient {
  const parsed = Document.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
    throw new InvalidClientError(
      `client metadata document is invalid: ${where}${issue?.message ?? 'bad shape'}`,
    );
  }
  const doc = parsed.data;
  if (doc.client_id !== url.href)
    throw new InvalidClientError('client metadata document: client_id does not equal the document URL');
  const method = doc.token_endpoint_auth_method;
  if (method !== 'none' && method !== 'private_key_jwt')
    throw new InvalidClientError(
      'client metadata document: token_endpoint_auth_method must be "none" or "private_key_jwt"',
    );
  if (method === 'private_key_jwt') {
    // ChatGPT's documents: the client signs an assertion with a key published at its jwks_uri (RFC 7523).
    const uri = doc.jwks_uri;
    if (doc.jwks === undefined && (typeof uri !== 'string' || !uri.startsWith('https://')))
      throw new InvalidClientError(
        'client metadata document: private_key_jwt needs an https jwks_uri or jwks',
      );
    if (doc.jwks !== undefined) {
      try {
        checkKeySet(doc.jwks);
      } catch (err) {
        throw new InvalidClientError(`client metadata document: jwks ${(err as Error).message}`);
      }
    }
  }
  if ('client_secret' in doc || 'client_secret_expires_at' in doc)
    throw new InvalidClientError('client metadata document: a public client must not carry a client_secret');
  if (doc.response_types && !doc.response_types.includes('code'))
    throw new InvalidClientError('client metadata document: response_types must include "code"');
  for (const raw of doc.redirect_uris) {
    let r: URL;
    try {
      r = new URL(raw);
    } catch {
      throw new InvalidClientError(`client metadata document: redirect URI "${raw}" is not a URL`);
    }
    if (isLoopbackRedirect(r, raw)) continue;
    if (r.origin !== url.origin || raw.includes('#') || r.username || r.password) {
      throw new InvalidClientError(
        `client metadata document: redirect URI "${raw}" is neither loopback nor on ${url.origin}`,
      );
    }
  }
  return {
    clientId: url.href,
    name: doc.client_name?.trim() || url.host,
    redirectUris: doc.redirect_uris,
    host: url.host,
    metadata: doc,
  };
}
