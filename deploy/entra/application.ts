// The connector application of one tool server at Microsoft Entra, as the Microsoft Graph `application`
// resource that deploy/entra/register.sh creates (POST /v1.0/applications). Each field is one row of the
// spec's App registration table; check-registration.ts verifies the same rows on the live registration.
// Every service's registration comes from this one function, so they cannot differ (spec: no difference
// from the other tool servers' registrations).

/** Microsoft Graph's application id, the same in every tenant. */
export const GRAPH_APP_ID = '00000003-0000-0000-c000-000000000000';
/** The delegated scope connectors request; tokens carry it in `scp` (docs/reference.md). */
export const MCP_SCOPE = 'mcp.access';

export interface ConnectorAppOptions {
  service: string;
  /** `{base_url}`, e.g. https://app.example.com */
  baseUrl: string;
  /** The assistant connector's two callback addresses (row 5). */
  callbacks: readonly string[];
  /** Id of the new `mcp.access` scope (a UUID the caller generates once). */
  scopeId: string;
  /** Id of Graph's delegated `User.Read` permission, looked up in the tenant by register.sh. */
  userReadId: string;
  displayName?: string;
}

export interface PermissionScope {
  id: string;
  value: string;
  type: 'User' | 'Admin';
  isEnabled: boolean;
  adminConsentDisplayName: string;
  adminConsentDescription: string;
  userConsentDisplayName: string;
  userConsentDescription: string;
}

export interface ResourceAccess {
  resourceAppId: string;
  resourceAccess: Array<{ id: string; type: 'Scope' | 'Role' }>;
}

export interface GraphApplication {
  displayName: string;
  signInAudience: string;
  identifierUris: string[];
  api: { requestedAccessTokenVersion: number; oauth2PermissionScopes: PermissionScope[] };
  web: {
    redirectUris: string[];
    implicitGrantSettings: { enableIdTokenIssuance: boolean; enableAccessTokenIssuance: boolean };
  };
  requiredResourceAccess: ResourceAccess[];
}

const SERVICE = /^[a-z][a-z0-9-]{0,31}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `{base_url}/<SERVICE>/mcp`: the identifier URI (row 2), equal to the resource the gateway serves. */
export function identifierUri(baseUrl: string, service: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${service}/mcp`;
}

export function connectorApplication(o: ConnectorAppOptions): GraphApplication {
  checkOptions(o);
  return {
    displayName: o.displayName ?? `${o.service} MCP connector`,
    // Row 1: this tenant only.
    signInAudience: 'AzureADMyOrg',
    // Row 2.
    identifierUris: [identifierUri(o.baseUrl, o.service)],
    api: {
      // Row 3: v2 tokens (issuer https://login.microsoftonline.com/<tid>/v2.0, aud = client id).
      requestedAccessTokenVersion: 2,
      // Row 4.
      oauth2PermissionScopes: [
        {
          id: o.scopeId,
          value: MCP_SCOPE,
          type: 'User',
          isEnabled: true,
          adminConsentDisplayName: `Use the ${o.service} tools`,
          adminConsentDescription: `Lets the assistant connector call the ${o.service} MCP tools as the signed-in user.`,
          userConsentDisplayName: `Use the ${o.service} tools`,
          userConsentDescription: `Lets the assistant connector call the ${o.service} MCP tools on your behalf.`,
        },
      ],
    },
    web: {
      // Row 5.
      redirectUris: [...o.callbacks],
      // Row 7: the connector reads the user's email from the id token.
      implicitGrantSettings: { enableIdTokenIssuance: true, enableAccessTokenIssuance: false },
    },
    // Row 6: User.Read, so the id token carries the email claim.
    requiredResourceAccess: [
      { resourceAppId: GRAPH_APP_ID, resourceAccess: [{ id: o.userReadId, type: 'Scope' }] },
    ],
  };
}

/**
 * Row 9 needs the app's own scope among its required permissions, so that one tenant-wide admin consent
 * covers `mcp.access` as well as `User.Read`; that entry names the app's id, known only after creation.
 */
export function requiredAccessWithOwnScope(
  o: Pick<ConnectorAppOptions, 'scopeId' | 'userReadId'> & { appId: string },
): { requiredResourceAccess: ResourceAccess[] } {
  for (const [flag, v] of [
    ['--app-id', o.appId],
    ['--scope-id', o.scopeId],
    ['--user-read-id', o.userReadId],
  ] as const) {
    if (!UUID.test(v)) throw new TypeError(`${flag}: "${v}" is not a GUID`);
  }
  return {
    requiredResourceAccess: [
      { resourceAppId: GRAPH_APP_ID, resourceAccess: [{ id: o.userReadId, type: 'Scope' }] },
      { resourceAppId: o.appId, resourceAccess: [{ id: o.scopeId, type: 'Scope' }] },
    ],
  };
}

function checkOptions(o: ConnectorAppOptions): void {
  if (!SERVICE.test(o.service)) throw new TypeError(`--service: "${o.service}" is not a service name`);
  let base: URL;
  try {
    base = new URL(o.baseUrl);
  } catch {
    throw new TypeError(`--base-url: "${o.baseUrl}" is not an absolute URL`);
  }
  // Entra accepts http(s) identifier URIs only on a verified domain of the tenant, and only https.
  if (base.protocol !== 'https:' || base.search || base.hash) {
    throw new TypeError(`--base-url: "${o.baseUrl}" must be an https URL without query or fragment`);
  }
  if (o.callbacks.length !== 2) {
    throw new TypeError(`--callback: the connector has two callback addresses; ${o.callbacks.length} given`);
  }
  for (const c of o.callbacks) {
    if (!/^https:\/\/[^\s]+$/.test(c)) throw new TypeError(`--callback: "${c}" must be an https URL`);
  }
  if (!UUID.test(o.scopeId)) throw new TypeError(`--scope-id: "${o.scopeId}" is not a GUID`);
  if (!UUID.test(o.userReadId)) throw new TypeError(`--user-read-id: "${o.userReadId}" is not a GUID`);
}
