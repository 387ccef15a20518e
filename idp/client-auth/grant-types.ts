import { DEVICE_CODE_GRANT } from '../device-codes.ts';
import { UnauthorizedClientError } from '../errors.ts';
import { MACHINE_CLIENT_TYPE } from '../machine-clients/index.ts';
import type { Client } from '../store/clients.ts';

/** Grants whose sign-in goes on with refresh tokens: a client registered for one of them may refresh. */
const ISSUES_REFRESH_TOKENS: ReadonlySet<string> = new Set(['authorization_code', DEVICE_CODE_GRANT]);

/**
 * RFC 7591 §2: a client uses only the grant types it registered (`grant_types`, at registration or in its
 * metadata document). `refresh_token` is allowed to a client registered for `refresh_token` or for a grant that
 * issues refresh tokens (a refresh token only comes from a grant the client may use). A client that registered no
 * list (the built-in `platform-cli`, a metadata document without the member) and machine clients (which have
 * their own rule: client_credentials or a workload assertion) are not limited here. Refused: 400
 * `unauthorized_client`, before the grant is looked at (a code or assertion presented is not consumed).
 */
export function checkRegisteredGrant(client: Client | undefined, grantType: string | undefined): void {
  const registered = client?.grantTypes;
  if (!client || !grantType || !registered || client.type === MACHINE_CLIENT_TYPE) return;
  if (registered.includes(grantType)) return;
  if (grantType === 'refresh_token' && registered.some((g) => ISSUES_REFRESH_TOKENS.has(g))) return;
  throw new UnauthorizedClientError(
    `this client is not registered for grant_type ${grantType.slice(0, 100)} (its grant_types: ${registered.join(' ')})`,
  );
}
