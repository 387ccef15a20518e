import { Pool } from 'undici';
import type { Logger } from '../../lib/logger.ts';
import type { TokenExchangeConfig } from '../config.ts';
import { ExchangeUnavailableError, InvalidTokenError } from '../errors.ts';

// The gateway as a client of the platform IdP's token endpoint: RFC 8693 token exchange of the caller's platform
// access token for the user's token at a connection's upstream (docs/gateway.md § Services with an upstream
// connection). The gateway authenticates as `platform-gateway` with HTTP Basic (RFC 6749 §2.3.1).

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** `resource` of an exchange for connection `<name>`. */
export const connectionResource = (name: string) => `urn:platform:connection:${name}`;

/** What the IdP answered. */
export type ExchangeOutcome =
  | {
      kind: 'token';
      /** The user's upstream access token: a secret, never logged. */
      accessToken: string;
      /** Seconds; undefined when the IdP gave none (the token is then used once, not cached). */
      expiresIn: number | undefined;
    }
  /** 400 interaction_required: the user has not connected (or the upstream refused the stored grant). */
  | { kind: 'not_connected'; connectUri: string | undefined };

export type ExchangeToken = (subjectToken: string, connection: string) => Promise<ExchangeOutcome>;

const TIMEOUT_MS = 10_000;
/** A token endpoint answer larger than this is refused (real ones are a few KiB). */
const MAX_ANSWER_BYTES = 64 * 1024;
/** What can travel in a header byte for byte (a bearer is visible ASCII, RFC 6750 §2.1), bounded. */
const HEADER_SAFE_TOKEN = /^[\x21-\x7E]{1,16384}$/;

/** RFC 6749 §2.3.1: client id and secret form-encoded, then joined and base64-encoded. */
function basic(clientId: string, secret: string): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString('base64')}`;
}

/**
 * One exchange = one POST. Keep-alive connections to the token endpoint (a pool of its own); every failure that
 * is not the user's becomes ExchangeUnavailableError (503) with one warning line naming what the IdP said (its
 * `error` code, never a token); a subject token the IdP refuses (`invalid_grant`: revoked, expired, blocked)
 * is INVALID_TOKEN, as the gateway itself would have answered with a current revocation mirror.
 */
export function createTokenExchange(
  config: TokenExchangeConfig,
  log: Logger,
): { exchange: ExchangeToken; close(): Promise<void> } {
  const url = new URL(config.tokenUrl);
  const path = url.pathname + url.search;
  const pool = new Pool(url.origin, {
    connect: { timeout: 5000 },
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
    connections: 16,
  });
  const authorization = basic(config.clientId, config.clientSecret);

  async function exchange(subjectToken: string, connection: string): Promise<ExchangeOutcome> {
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: connectionResource(connection),
    }).toString();
    let status: number;
    let text: string;
    try {
      const res = await pool.request({
        method: 'POST',
        path,
        headers: {
          authorization,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      status = res.statusCode;
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_ANSWER_BYTES) {
          res.body.destroy();
          throw new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      const code = (err as { code?: string }).code ?? (err as Error).name;
      log.warn({ connection, tokenUrl: config.tokenUrl, code }, 'token exchange: the IdP did not answer');
      throw new ExchangeUnavailableError(
        'exchange_unreachable',
        `the platform's token endpoint did not answer the exchange for ${connection}; retry shortly`,
      );
    }
    let body: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
        body = parsed as Record<string, unknown>;
      }
    } catch {
      // not JSON: judged by the status alone below
    }
    if (status === 200) return granted(body, connection);
    const error = typeof body.error === 'string' ? body.error : undefined;
    if (status === 400 && error === 'interaction_required') {
      const uri = body.connect_uri;
      return {
        kind: 'not_connected',
        connectUri: typeof uri === 'string' && isHttpUrl(uri) ? uri : undefined,
      };
    }
    if (status === 400 && error === 'invalid_grant') {
      throw new InvalidTokenError(
        'token_revoked',
        'the platform refused to exchange this token (revoked, expired or the user is blocked)',
      );
    }
    // invalid_client / unauthorized_client (GATEWAY_CLIENT_SECRET does not match the IdP's), invalid_target (no
    // such connection at the IdP), 5xx: the operator's to fix, not the user's.
    log.error(
      {
        connection,
        tokenUrl: config.tokenUrl,
        status,
        idpError: error,
        idpErrorDescription:
          typeof body.error_description === 'string' ? body.error_description.slice(0, 200) : undefined,
      },
      'token exchange refused by the IdP',
    );
    throw new ExchangeUnavailableError(
      status >= 500 ? 'exchange_unreachable' : 'exchange_refused',
      `the platform could not exchange the token for ${connection} (${error ?? `HTTP ${status}`}); retry later`,
    );
  }

  function granted(body: Record<string, unknown>, connection: string): ExchangeOutcome {
    const token = body.access_token;
    const type = body.token_type;
    const issued = body.issued_token_type;
    const expiresIn = body.expires_in;
    let problem: string | undefined;
    if (typeof token !== 'string' || !HEADER_SAFE_TOKEN.test(token)) problem = 'no usable access_token';
    else if (typeof type !== 'string' || type.toLowerCase() !== 'bearer')
      problem = 'token_type is not Bearer';
    else if (issued !== undefined && issued !== ACCESS_TOKEN_TYPE)
      problem = 'issued_token_type is not an access token';
    else if (expiresIn !== undefined && (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn))) {
      problem = 'expires_in is not a number';
    }
    if (problem !== undefined) {
      log.error({ connection, tokenUrl: config.tokenUrl, problem }, 'token exchange answer unusable');
      throw new ExchangeUnavailableError(
        'exchange_failed',
        `the platform's answer to the exchange for ${connection} was unusable; retry later`,
      );
    }
    return { kind: 'token', accessToken: token as string, expiresIn: expiresIn as number | undefined };
  }

  return { exchange, close: () => pool.close() };
}

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.protocol === 'https:' || u.protocol === 'http:';
  } catch {
    return false;
  }
}
