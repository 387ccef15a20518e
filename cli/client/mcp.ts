import { Client, StreamableHTTPClientTransport, withDpop } from '@modelcontextprotocol/client';
import { isServiceName } from '../../lib/service-name.ts';
import type { ClientConfig } from '../config.ts';
import { presentedToken, renewAccessToken } from '../token.ts';
import { readCredentials } from './credentials.ts';
import { CliError, describeError, isUnreachable, LOGIN_HINT } from './errors.ts';
import type { Io } from './io.ts';

const CLIENT_INFO = { name: 'platform-cli', version: '0.1.0' };

/** The gateway's error body (`{"error":{"code","message","context":{"reason"}}}`), as far as it is one. */
interface GatewayRefusal {
  status: number;
  code?: string;
  message?: string;
  reason?: string;
}

/**
 * One MCP conversation with a service through the gateway, on the SDK v2 client: it asks the server for the
 * 2026-07-28 revision first (`server/discover`) and falls back to the `initialize` handshake for an older
 * server. When the gateway refuses the access token as revoked (401, reason `token_revoked`) and the token came
 * from `platform login`, the token is refreshed once and the conversation run again: a revoked access token
 * with a refresh token that still works is what an ungrant or a key rotation leaves behind.
 */
export async function withService<T>(
  config: ClientConfig,
  service: string,
  io: Io,
  work: (client: Client, endpoint: string) => Promise<T>,
): Promise<T> {
  if (!isServiceName(service)) {
    throw new CliError('USAGE', `"${service}" is not a service name (e.g. platform, mail, deals)`, {
      exitCode: 2,
    });
  }
  const endpoint = new URL(`${config.gatewayUrl}/${service}/mcp`);
  const presented = await presentedToken(config, io);
  let token = presented.token;
  for (let attempt = 0; ; attempt++) {
    let refusal: GatewayRefusal | undefined;
    const bearer = token;
    // A bound token goes as `Authorization: DPoP` with a fresh proof per request; the SDK's wrapper also
    // answers a `use_dpop_nonce` challenge by signing again once with the nonce.
    const send = presented.dpop
      ? withDpop(presented.dpop.session, () => bearer)(fetch)
      : (url: string | URL, init?: RequestInit) => {
          const headers = new Headers(init?.headers);
          headers.set('authorization', `Bearer ${bearer}`);
          return fetch(url, { ...init, headers });
        };
    const transport = new StreamableHTTPClientTransport(endpoint, {
      fetch: async (url, init) => {
        const res = await send(url, init);
        // The last answer decides: a refused era probe followed by a good handshake is no refusal.
        refusal = res.status >= 400 ? await readRefusal(res.clone()) : undefined;
        return res;
      },
    });
    const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(transport);
      return await work(client, endpoint.href);
    } catch (err) {
      if (attempt === 0 && !config.token && refusal?.status === 401 && refusal.reason === 'token_revoked') {
        token = await renewAccessToken(config, io, bearer);
        continue;
      }
      throw await gatewayError(err, refusal, { config, service, endpoint: endpoint.href, bearer });
    } finally {
      await client.close().catch(() => {});
    }
  }
}

async function readRefusal(res: Response): Promise<GatewayRefusal> {
  const out: GatewayRefusal = { status: res.status };
  try {
    const body = (await res.json()) as {
      error?: { code?: unknown; message?: unknown; context?: { reason?: unknown } };
    };
    const e = body?.error;
    if (e && typeof e === 'object') {
      if (typeof e.code === 'string') out.code = e.code;
      if (typeof e.message === 'string') out.message = e.message;
      if (typeof e.context?.reason === 'string') out.reason = e.context.reason;
    }
  } catch {
    // not JSON: the status alone
  }
  return out;
}

/** The services a token covers, from its `mcp:<service>` scopes (stored login, else the JWT's own claim). */
async function coveredServices(config: ClientConfig, bearer: string): Promise<string[]> {
  let scope = '';
  if (!config.token)
    scope = (await readCredentials(config.credentialsPath).catch(() => undefined))?.scope ?? '';
  if (!scope) {
    try {
      const claims = JSON.parse(Buffer.from(bearer.split('.')[1] ?? '', 'base64url').toString('utf8'));
      if (typeof claims.scope === 'string') scope = claims.scope;
      else if (typeof claims.scp === 'string') scope = claims.scp;
    } catch {
      // opaque token: nothing to list
    }
  }
  return scope
    .split(' ')
    .filter((s) => s.startsWith('mcp:'))
    .map((s) => s.slice(4));
}

async function gatewayError(
  err: unknown,
  refusal: GatewayRefusal | undefined,
  ctx: { config: ClientConfig; service: string; endpoint: string; bearer: string },
): Promise<CliError> {
  if (err instanceof CliError) return err;
  if (refusal) {
    if (refusal.status === 404 && refusal.code === 'NOT_FOUND') {
      const known = await coveredServices(ctx.config, ctx.bearer);
      const list = known.length > 0 ? `; your sign-in covers: ${known.join(', ')}` : '';
      return new CliError('CALL_FAILED', `the gateway has no service "${ctx.service}"${list}`, {
        cause: err,
      });
    }
    const detail = refusal.code
      ? `${refusal.code}${refusal.message ? `: ${refusal.message}` : ''}${refusal.reason && refusal.reason !== refusal.message ? ` (${refusal.reason})` : ''}`
      : describeError(err);
    let hint = refusal.status === 401 ? `; ${LOGIN_HINT}` : '';
    if (refusal.status === 403 && refusal.code === 'INSUFFICIENT_SCOPE') {
      const known = await coveredServices(ctx.config, ctx.bearer);
      if (known.length > 0) hint = `; your sign-in covers: ${known.join(', ')}`;
    }
    return new CliError('CALL_FAILED', `${ctx.endpoint} answered ${refusal.status}: ${detail}${hint}`, {
      cause: err,
    });
  }
  if (isUnreachable(err)) {
    const where = `${ctx.endpoint} (${ctx.config.gatewayFrom})`;
    return new CliError('UNREACHABLE', `cannot reach the gateway at ${where}: ${describeError(err)}`, {
      cause: err,
    });
  }
  return new CliError('CALL_FAILED', `${ctx.endpoint}: ${describeError(err)}`, { cause: err });
}
