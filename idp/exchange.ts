import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../lib/logger.ts';

/** One request as an endpoint gets it (idp/context.ts's Endpoint): a module of its own, so what the context holds
 * (the DPoP checker, for one) can take it without importing the context. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  log: Logger;
  requestId: string;
}
