import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../lib/logger.ts';
import type { RevocationPublisher } from '../lib/revocation.ts';
import type { IdpConfig } from './config.ts';
import type { ClientStore } from './store/clients.ts';
import type { CodeStore } from './store/codes.ts';
import type { ConsentStore } from './store/consents.ts';
import type { DeviceCodeStore } from './store/device-codes.ts';
import type { RefreshTokenStore } from './store/refresh-tokens.ts';
import type { SessionStore } from './store/sessions.ts';
import type { JwtSigner } from './tokens/jwt.ts';
import type { SigningKey } from './tokens/keys.ts';

/** Everything an endpoint may use; built once in app.ts, never a module global. */
export interface IdpContext {
  config: IdpConfig;
  keys: readonly SigningKey[];
  signer: JwtSigner;
  clients: ClientStore;
  codes: CodeStore;
  consents: ConsentStore;
  deviceCodes: DeviceCodeStore;
  refreshTokens: RefreshTokenStore;
  sessions: SessionStore;
  revocations: RevocationPublisher;
  /** Key of the consent form's CSRF token, derived from the signing key (the same on every replica). */
  csrfKey: Buffer;
}

export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  log: Logger;
  requestId: string;
}

export type Endpoint = (ctx: IdpContext, x: Exchange) => Promise<void>;
