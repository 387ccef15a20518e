import { type CheckRow, fail, pass, skip } from '../doctor/result.ts';
import { GRAPH_APP_ID, identifierUri, MCP_SCOPE } from './application.ts';

// Checks a registration against the spec's App registration table (rows R1-R9) and operational acceptance
// checks #11 (manifest: token version 2, identifier URI in URL form), #12 (service principal) and #13 (vault
// secret of 40 to 50 characters). verify.sh feeds it what `az` reports about the live registration; the tests
// feed it the body register.sh would create.

export interface RegistrationFacts {
  /** The Graph application object (`az ad app show --id <appId> -o json`). */
  app: unknown;
  servicePrincipalExists: boolean;
  /** `az ad app permission list-grants --id <appId> --show-resource-name -o json`; undefined: not read. */
  grants: unknown;
  /** Length of the secret in the vault; undefined: not read. */
  secretLength: number | undefined;
}

export interface ExpectedRegistration {
  service: string;
  baseUrl: string;
  /** Graph's delegated User.Read permission id in this tenant. */
  userReadId: string;
  /** The connector's callback addresses, when the operator gave them. */
  callbacks?: readonly string[];
}

type Json = Record<string, unknown>;

const obj = (v: unknown): Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

export function checkRegistration(facts: RegistrationFacts, want: ExpectedRegistration): CheckRow[] {
  const app = obj(facts.app);
  const api = obj(app.api);
  const web = obj(app.web);
  const id = (ref: string, name: string) => ({ ref, subject: want.service, name });
  const verdict = (ref: string, name: string, ok: boolean, good: string, bad: string) =>
    ok ? pass(id(ref, name), good) : fail(id(ref, name), bad);
  const rows: CheckRow[] = [];

  rows.push(
    verdict(
      'R1',
      'single-tenant sign-in audience',
      app.signInAudience === 'AzureADMyOrg',
      'AzureADMyOrg',
      `signInAudience is ${JSON.stringify(app.signInAudience)}, expected "AzureADMyOrg"`,
    ),
  );
  rows.push(
    verdict(
      '#12',
      'service principal exists',
      facts.servicePrincipalExists,
      'present',
      'no service principal: az ad sp create --id <appId>',
    ),
  );

  const uri = identifierUri(want.baseUrl, want.service);
  const uris = arr(app.identifierUris);
  rows.push(
    verdict(
      '#11',
      'identifier URI in URL form',
      uris.includes(uri) && /^https:\/\//.test(uri),
      uri,
      `identifierUris is ${JSON.stringify(uris)}, expected to contain "${uri}"`,
    ),
  );
  rows.push(
    verdict(
      '#11',
      'access token version 2',
      api.requestedAccessTokenVersion === 2,
      'requestedAccessTokenVersion 2',
      `requestedAccessTokenVersion is ${JSON.stringify(api.requestedAccessTokenVersion)}, expected 2`,
    ),
  );

  const scope = arr(api.oauth2PermissionScopes)
    .map(obj)
    .find((s) => s.value === MCP_SCOPE);
  const named = (k: string) => typeof scope?.[k] === 'string' && (scope[k] as string).trim() !== '';
  const scopeOk =
    scope !== undefined &&
    scope.type === 'User' &&
    scope.isEnabled === true &&
    named('adminConsentDisplayName') &&
    named('userConsentDisplayName');
  rows.push(
    verdict(
      'R4',
      `delegated scope ${MCP_SCOPE}`,
      scopeOk,
      'type User, enabled, admin and user consent names',
      scope === undefined
        ? `no scope with value ${MCP_SCOPE}`
        : `scope ${MCP_SCOPE}: type ${JSON.stringify(scope.type)}, isEnabled ${JSON.stringify(scope.isEnabled)}, consent names ${named('adminConsentDisplayName') && named('userConsentDisplayName') ? 'present' : 'missing'}`,
    ),
  );

  const redirects = arr(web.redirectUris).filter((u): u is string => typeof u === 'string');
  const expected = want.callbacks;
  const redirectsOk =
    redirects.length === 2 &&
    (expected === undefined || (expected.length === 2 && expected.every((c) => redirects.includes(c))));
  rows.push(
    verdict(
      'R5',
      'two connector web redirect URIs',
      redirectsOk,
      redirects.join(', '),
      `web.redirectUris is ${JSON.stringify(redirects)}${expected ? `, expected ${JSON.stringify(expected)}` : ', expected two'}`,
    ),
  );

  const graph = arr(app.requiredResourceAccess)
    .map(obj)
    .find((r) => r.resourceAppId === GRAPH_APP_ID);
  const userRead = arr(graph?.resourceAccess)
    .map(obj)
    .some((a) => a.id === want.userReadId && a.type === 'Scope');
  rows.push(
    verdict(
      'R6',
      'Graph User.Read required',
      userRead,
      `User.Read (${want.userReadId})`,
      'requiredResourceAccess lacks the delegated Microsoft Graph User.Read',
    ),
  );

  const implicit = obj(web.implicitGrantSettings);
  rows.push(
    verdict(
      'R7',
      'ID token issuance enabled',
      implicit.enableIdTokenIssuance === true,
      'enableIdTokenIssuance true',
      'web.implicitGrantSettings.enableIdTokenIssuance is not true',
    ),
  );

  // Row 8: a secret created for two years (Graph reports start and end; the value itself never).
  const DAY = 86_400_000;
  const twoYears = arr(app.passwordCredentials)
    .map(obj)
    .map((c) => (Date.parse(String(c.endDateTime)) - Date.parse(String(c.startDateTime))) / DAY)
    .filter((days) => days >= 729 && days <= 732);
  const hasSecrets = arr(app.passwordCredentials).length > 0;
  rows.push(
    verdict(
      'R8',
      'client secret valid 2 years',
      twoYears.length > 0,
      'a secret valid for 2 years',
      hasSecrets ? 'no client secret with a 2-year validity' : 'no client secret',
    ),
  );

  const secretId = id('#13', 'vault secret 40-50 characters');
  if (facts.secretLength === undefined) rows.push(skip(secretId, 'not read (no --vault given)'));
  else if (facts.secretLength >= 40 && facts.secretLength <= 50)
    rows.push(pass(secretId, `${facts.secretLength} characters`));
  else {
    rows.push(
      fail(
        secretId,
        `${facts.secretLength} characters: ${
          facts.secretLength > 50
            ? 'corrupted (stderr captured with the secret?); create a new secret'
            : 'not a client secret'
        }`,
      ),
    );
  }

  const consentId = id('R9', 'tenant admin consent');
  if (facts.grants === undefined) rows.push(skip(consentId, 'grants not read'));
  else {
    const tenantWide = arr(facts.grants)
      .map(obj)
      .filter((g) => g.consentType === 'AllPrincipals');
    const granted = new Set(
      tenantWide.flatMap((g) =>
        String(g.scope ?? '')
          .split(/\s+/)
          .filter(Boolean),
      ),
    );
    const missing = ['User.Read', MCP_SCOPE].filter((s) => !granted.has(s));
    rows.push(
      missing.length === 0
        ? pass(consentId, `User.Read and ${MCP_SCOPE} consented for all users`)
        : fail(
            consentId,
            `no tenant-wide consent for ${missing.join(', ')}: az ad app permission admin-consent --id <appId>`,
          ),
    );
  }
  return rows;
}
