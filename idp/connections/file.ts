import { readFileSync } from 'node:fs';
import { isMap, isNode, isSeq, LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';

// PLATFORM_CONNECTIONS_FILE (docs/connections.md): the upstream systems a user may connect their own access to.
// `oauth`: any OAuth 2.x authorization server (a third-party MCP server's, GitHub's, a SaaS API's), connected
// through the IdP's connect page. `entra`: the web application's own Microsoft Entra sign-in, redeemed from the
// user's Auth.js account. Parsed whole at start-up (a bad file stops it) and on SIGHUP (a bad file keeps the old).

/** A file that cannot be used; the message is one line naming the problem. */
export class ConnectionsFileError extends Error {
  override readonly name = 'ConnectionsFileError';
}

export const CONNECTION_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/** Operator-written URLs: https, or http on a loopback host (a local stand-in). */
const endpointUrl = z.string().refine((v) => {
  try {
    const u = new URL(v);
    return (
      (u.protocol === 'https:' ||
        (u.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname))) &&
      u.hash === '' &&
      u.username === '' &&
      u.password === ''
    );
  } catch {
    return false;
  }
}, 'must be an https URL (http only on a loopback host), without credentials or fragment');

const scopes = z.array(z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, 'is not a scope token')).max(50);

const oauthSchema = z
  .object({
    name: z.string().regex(CONNECTION_NAME, 'must match [a-z][a-z0-9-]{0,31}'),
    kind: z.literal('oauth'),
    issuer: endpointUrl.optional(),
    authorization_endpoint: endpointUrl.optional(),
    token_endpoint: endpointUrl.optional(),
    client_id: z.string().min(1).max(512),
    client_secret_file: z.string().min(1).optional(),
    scopes: scopes,
    resource: z.string().url().optional(),
    revocation_endpoint: endpointUrl.optional(),
    // Further optional members (ours): the words the connect page and the listings use.
    display_name: z.string().min(1).max(80).optional(),
  })
  .strict();

const entraSchema = z
  .object({
    name: z.string().regex(CONNECTION_NAME, 'must match [a-z][a-z0-9-]{0,31}'),
    kind: z.literal('entra'),
    tenant_id: z.string().regex(/^[A-Za-z0-9.-]{1,100}$/, 'is not a tenant id or domain'),
    client_id: z.string().min(1).max(512),
    client_secret_file: z.string().min(1),
    scopes: scopes.min(1),
    token_endpoint: endpointUrl.optional(),
    display_name: z.string().min(1).max(80).optional(),
  })
  .strict();

const connectionSchema = z.discriminatedUnion('kind', [oauthSchema, entraSchema]);

interface Common {
  name: string;
  /** What the user reads: `display_name`, else the name. */
  displayName: string;
  clientId: string;
  /** The client secret (read from client_secret_file); undefined: a public client (oauth only). */
  clientSecret: string | undefined;
  scopes: readonly string[];
}

export interface OAuthConnection extends Common {
  kind: 'oauth';
  /** Metadata by RFC 8414, then OpenID discovery; undefined when both endpoints are given. */
  issuer: string | undefined;
  authorizationEndpoint: string | undefined;
  tokenEndpoint: string | undefined;
  /** RFC 8707 resource, sent at authorize and at the token endpoint. */
  resource: string | undefined;
  revocationEndpoint: string | undefined;
}

export interface EntraConnection extends Common {
  kind: 'entra';
  tenantId: string;
  clientSecret: string;
  tokenEndpoint: string;
}

export type ConnectionConfig = OAuthConnection | EntraConnection;

/** Parses the file's text; `readSecret` reads a client_secret_file (tests pass their own). */
export function parseConnections(
  text: string,
  readSecret: (path: string) => string = readSecretFile,
): ConnectionConfig[] {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const yamlError = doc.errors[0];
  if (yamlError)
    throw new ConnectionsFileError(
      `not valid YAML at line ${lines.linePos(yamlError.pos[0]).line}: ${yamlError.message.split('\n')[0]}`,
    );
  const root = doc.contents;
  if (!isMap(root) || !root.has('connections'))
    throw new ConnectionsFileError('the file must be a mapping with a `connections:` list');
  if (root.items.length !== 1) throw new ConnectionsFileError('only `connections:` is read at the top level');
  const seq = root.get('connections', true);
  if (!isSeq(seq)) throw new ConnectionsFileError('`connections:` must be a list');
  const seen = new Set<string>();
  return seq.items.map((node, i) => {
    const line = isNode(node) && node.range ? `, line ${lines.linePos(node.range[0]).line}` : '';
    const where = `connection ${i + 1} (connections[${i}]${line})`;
    const parsed = connectionSchema.safeParse(isNode(node) ? node.toJSON() : null);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const path = issue.path.length ? `${issue.path.join('.')}: ` : '';
      throw new ConnectionsFileError(`${where}: ${path}${issue.message}`);
    }
    const v = parsed.data;
    if (seen.has(v.name)) throw new ConnectionsFileError(`${where}: name ${v.name} is listed twice`);
    seen.add(v.name);
    const secret = (file: string) => {
      try {
        const s = readSecret(file).trim();
        if (s === '') throw new Error('it is empty');
        return s;
      } catch (err) {
        const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        throw new ConnectionsFileError(`${where}: client_secret_file ${file} cannot be read: ${reason}`);
      }
    };
    const common = {
      name: v.name,
      displayName: v.display_name ?? v.name,
      clientId: v.client_id,
      scopes: Object.freeze([...v.scopes]),
    };
    if (v.kind === 'entra') {
      return Object.freeze({
        ...common,
        kind: 'entra',
        tenantId: v.tenant_id,
        clientSecret: secret(v.client_secret_file),
        tokenEndpoint:
          v.token_endpoint ?? `https://login.microsoftonline.com/${v.tenant_id}/oauth2/v2.0/token`,
      } satisfies EntraConnection);
    }
    const both = v.authorization_endpoint !== undefined && v.token_endpoint !== undefined;
    if (v.issuer === undefined && !both)
      throw new ConnectionsFileError(
        `${where}: give issuer (its metadata is discovered) or both authorization_endpoint and token_endpoint`,
      );
    if (
      v.issuer === undefined &&
      (v.authorization_endpoint === undefined) !== (v.token_endpoint === undefined)
    )
      throw new ConnectionsFileError(`${where}: authorization_endpoint and token_endpoint go together`);
    return Object.freeze({
      ...common,
      kind: 'oauth',
      clientSecret: v.client_secret_file === undefined ? undefined : secret(v.client_secret_file),
      issuer: v.issuer,
      authorizationEndpoint: v.authorization_endpoint,
      tokenEndpoint: v.token_endpoint,
      resource: v.resource,
      revocationEndpoint: v.revocation_endpoint,
    } satisfies OAuthConnection);
  });
}

function readSecretFile(path: string): string {
  return readFileSync(path, 'utf8');
}

/** Reads and parses the file; every failure is a ConnectionsFileError of one line. */
export function readConnectionsFile(path: string): ConnectionConfig[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConnectionsFileError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  return parseConnections(text);
}
