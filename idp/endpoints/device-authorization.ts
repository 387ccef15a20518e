import type { Endpoint } from '../context.ts';
import { OAuthError } from '../errors.ts';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** The device flow (RFC 8628) is planned, not implemented (spec § Endpoints). */
export const deviceAuthorization: Endpoint = async () => {
  throw new OAuthError(
    'unsupported_grant_type',
    'the device authorization flow (RFC 8628) is not implemented yet',
  );
};
