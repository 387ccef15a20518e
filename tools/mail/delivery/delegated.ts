import { DependencyUnavailableError, ToolError } from '../../kit/tool-errors.ts';
import type { DeliveryContext, EventReceipt, MailReceipt, OutgoingEvent, OutgoingMail } from './delivery.ts';
import { graphEventBody, graphMailBody } from './graph.ts';
import { GraphRejectedError, graphErrorMessage } from './graph-client.ts';

// The specification's delegated self path: the caller's own mail and events go to Microsoft Graph as the caller
// (`/me/sendMail`, `/me/events`) with the delegated token of their `entra` connection, which the gateway sends in
// `x-platform-upstream-token` (signed under identity v4). No app-only permission is needed for it. A refusal by
// Graph is the caller's connection's problem and says so; it never falls back to the app-only path, which would
// send as the user with powers the user did not give.

/** The connection's token is missing or Graph refused it (401/403): a tool error naming the connection. */
export class ConnectionRefusedError extends ToolError {
  constructor(code: 'connection_required' | 'connection_refused', message: string) {
    super(code, message, 403);
  }
}

export interface DelegatedMail {
  /** The `entra` connection (MAIL_UPSTREAM_CONNECTION) the delegated token comes from. */
  readonly connection: string;
  sendMail(mail: OutgoingMail, token: string | undefined, ctx: DeliveryContext): Promise<MailReceipt>;
  createEvent(event: OutgoingEvent, token: string | undefined, ctx: DeliveryContext): Promise<EventReceipt>;
}

export interface DelegatedMailOptions {
  connection: string;
  /** GRAPH_BASE_URL, e.g. `https://graph.microsoft.com/v1.0`. */
  baseUrl: string;
  fetch?: typeof globalThis.fetch;
  timeoutMs?: number;
}

export function createDelegatedMail(opts: DelegatedMailOptions): DelegatedMail {
  const { connection, baseUrl } = opts;
  const doFetch = opts.fetch ?? globalThis.fetch;
  const timeoutMs = opts.timeoutMs ?? 10_000;

  async function post(path: string, body: unknown, token: string | undefined, signal?: AbortSignal) {
    if (!token) {
      // The gateway sends the token for services with MAIL_UPSTREAM_CONNECTION set there too.
      throw new ConnectionRefusedError(
        'connection_required',
        `no delegated token from your ${connection} connection reached the mail server (the gateway must have MAIL_UPSTREAM_CONNECTION=${connection}); nothing was sent`,
      );
    }
    const timeout = AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await doFetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new DependencyUnavailableError(
        'graph',
        `Microsoft Graph is unreachable (${cause}); delivery is not confirmed`,
      );
    }
    if (res.status === 401 || res.status === 403) {
      const detail = await graphErrorMessage(res);
      throw new ConnectionRefusedError(
        'connection_refused',
        `Microsoft Graph refused your ${connection} connection (HTTP ${res.status}, ${detail}); reconnect ${connection} or ask an administrator for the delegated permission; nothing was sent`,
      );
    }
    if (res.status >= 500 || res.status === 429) {
      await res.body?.cancel();
      throw new DependencyUnavailableError(
        'graph',
        `Microsoft Graph answered ${res.status}; delivery is not confirmed`,
      );
    }
    if (!res.ok) {
      throw new GraphRejectedError(
        res.status,
        `Microsoft Graph refused the request: ${await graphErrorMessage(res)}`,
      );
    }
    const text = await res.text();
    return text ? (JSON.parse(text) as unknown) : undefined;
  }

  return {
    connection,
    async sendMail(mail, token, ctx) {
      // POST /me/sendMail answers 202 with an empty body.
      await post('/me/sendMail', graphMailBody(mail), token, ctx.signal);
      return { delivery: 'graph', status: 'sent' };
    },
    async createEvent(event, token, ctx) {
      const created = (await post('/me/events', graphEventBody(event), token, ctx.signal)) as
        | { id?: unknown }
        | undefined;
      return {
        delivery: 'graph',
        status: 'created',
        eventId: typeof created?.id === 'string' ? created.id : undefined,
      };
    },
  };
}
