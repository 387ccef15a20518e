import type { Endpoint } from '../context.ts';
import { OAuthError } from '../errors.ts';

/** The device flow (RFC 8628) is planned, not implemented (docs/reference.md § Routes). */
export const deviceAuthorization: Endpoint = async () => {
  throw new OAuthError(
    'unsupported_grant_type',
    'the device authorization flow (RFC 8628) is not implemented yet',
  );
};
