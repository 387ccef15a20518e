import * as oidc from 'openid-client';
import { CliError, describeError, isUnreachable } from './errors.ts';

/** The static, pre-registered first-party client (spec: command-line login sequence, step 2). */
export const CLI_CLIENT_ID = 'platform-cli';

/** Seconds every request to the issuer may take; a CLI that hangs on a dead server helps nobody. */
const REQUEST_TIMEOUT_SECONDS = 10;

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface IssuerOptions {
  /** Told once when the issuer is plain http on a non-loopback host (tokens would cross the network in clear). */
  warn?: (message: string) => void;
  /** Where the issuer URL came from (`from --issuer`, …), named when it cannot be used. */
  from?: string;
}

/** What `from` says for an issuer read from the stored credentials. */
export const FROM_STORED_LOGIN = 'stored by `platform login`';

/**
 * The issuer's metadata from discovery (`/.well-known/openid-configuration`), bound to the CLI client. The
 * library checks that the metadata names exactly this issuer. Plain http is allowed because the development
 * stack and tests run on http://localhost; elsewhere it is the user's explicit choice, so it is warned about.
 */
export async function discoverIssuer(
  issuer: string,
  opts: IssuerOptions & { clientId?: string } = {},
): Promise<oidc.Configuration> {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new CliError('USAGE', `issuer "${issuer}" is not an absolute URL`, { exitCode: 2 });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new CliError('USAGE', `issuer "${issuer}" must be an http(s) URL`, { exitCode: 2 });
  }
  const insecure = url.protocol === 'http:';
  if (insecure && !LOOPBACK.has(url.hostname)) {
    opts.warn?.(`warning: ${issuer} is plain http; tokens travel unencrypted`);
  }
  try {
    return await oidc.discovery(url, opts.clientId ?? CLI_CLIENT_ID, undefined, oidc.None(), {
      timeout: REQUEST_TIMEOUT_SECONDS,
      execute: insecure ? [oidc.allowInsecureRequests] : [],
    });
  } catch (err) {
    const where = opts.from ? `${issuer} (${opts.from})` : issuer;
    const message = isUnreachable(err)
      ? `cannot reach the IdP at ${where}: ${describeError(err)}`
      : `cannot use the IdP at ${where}: ${describeOidcError(err)}`;
    throw new CliError('UNREACHABLE', message, { cause: err });
  }
}

/** The OAuth error code of a token or revocation endpoint refusal (`invalid_grant`, …), if that is what it was. */
export function oauthErrorCode(err: unknown): string | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError)
    return err.error;
  return undefined;
}

/** One readable line for whatever openid-client or fetch threw. */
export function describeOidcError(err: unknown): string {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError) {
    return err.error_description ? `${err.error}: ${err.error_description}` : err.error;
  }
  return describeError(err);
}
