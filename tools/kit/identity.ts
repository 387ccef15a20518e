import type { IncomingMessage } from 'node:http';
import { type Identity, IdentityError, verifyIdentity } from '../../lib/identity.ts';
import { UnauthorizedError } from './errors.ts';

/**
 * The caller, from the gateway's signed headers only: a tool server never sees a bearer, so these headers
 * are the whole of its trust in who is calling. Missing, forged or stale (over 60 s) → 401 UNAUTHORIZED.
 */
export function authenticate(req: IncomingMessage, secret: string, now?: number): Identity {
  try {
    return verifyIdentity(secret, req.headers, now);
  } catch (err) {
    if (err instanceof IdentityError) throw new UnauthorizedError(err.message);
    throw err;
  }
}
