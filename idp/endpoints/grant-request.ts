// One token request as a grant's handler gets it, and the kinds of client the table of grants (token.ts) names:
// its own module, so a grant written elsewhere (idp/token-exchange) takes it without importing the endpoint.
import { MACHINE_CLIENT_TYPE } from '../machine-clients/index.ts';
import type { Client } from '../store/clients.ts';
import { GATEWAY_CLIENT_TYPE } from '../token-exchange/gateway-client.ts';

/**
 * Who a token request comes from: a public client (client_id only), a confidential one (a client users sign in
 * to that authenticates: a client secret or private_key_jwt), a machine client (idp/machine-clients), or the
 * gateway's own client (PLATFORM_GATEWAY_CLIENT_SECRET, idp/token-exchange).
 */
export type ClientKind = 'public' | 'confidential' | 'machine' | 'gateway';

export const KIND_NAMES: Readonly<Record<ClientKind, string>> = {
  public: 'a public client',
  confidential: 'a confidential client',
  machine: 'a machine client',
  gateway: 'the gateway’s client',
};

export function clientKind(client: Client): ClientKind {
  if (client.type === MACHINE_CLIENT_TYPE) return 'machine';
  if (client.type === GATEWAY_CLIENT_TYPE) return 'gateway';
  return (client.authMethod ?? 'none') === 'none' ? 'public' : 'confidential';
}

/** One token request as a grant's handler gets it: the client it stands for, checked against the grant's row. */
export interface GrantRequest {
  grantType: string;
  form: Map<string, string>;
  /** The authenticated client; undefined when the grant named its client itself (a workload assertion). */
  client: Client | undefined;
  clientId: string;
  kind: ClientKind;
  /** The DPoP proof's key thumbprint (what is issued is bound to it); undefined: no proof. */
  jkt: string | undefined;
  /** A workload assertion's issuer, when that assertion named the machine client. */
  workloadIssuer?: string;
}
