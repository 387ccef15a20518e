// Microsoft Graph and Entra's client-credentials token endpoint, just enough of them to test the mail server's
// two paths against over HTTP: the delegated self path (`/me/sendMail`, `/me/events` with the user's own token)
// and the app-only path (`/users/{id}/…` with a client-credentials token). Microsoft is out of reach in tests.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GraphCall {
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/** Graph's /me and /users/{id} mail and event routes and Entra's client-credentials token endpoint. */
export class GraphStandIn {
  server!: Server;
  url = '';
  calls: GraphCall[] = [];
  tokenRequests = 0;
  /** Delegated tokens Graph accepts for /me (the user's own). */
  delegated = new Set<string>();
  /** The status /me answers instead (401, 403), 0 for normal answers. */
  meStatus = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    const json = (status: number, body?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body === undefined ? '' : JSON.stringify(body));
    };
    if (req.url === '/tenant-1/oauth2/v2.0/token') {
      this.tokenRequests++;
      return json(200, { token_type: 'Bearer', expires_in: 3600, access_token: 'app-only-token' });
    }
    const authorization = req.headers.authorization;
    this.calls.push({ path: req.url!, authorization, body: raw ? JSON.parse(raw) : undefined });
    const bearer = authorization?.replace(/^Bearer /, '') ?? '';
    if (req.url!.startsWith('/v1.0/me/')) {
      if (this.meStatus) {
        return json(this.meStatus, {
          error: { code: 'InvalidAuthenticationToken', message: 'Lifetime validation failed.' },
        });
      }
      if (!this.delegated.has(bearer))
        return json(401, { error: { code: 'InvalidAuthenticationToken', message: 'invalid' } });
      if (req.url === '/v1.0/me/sendMail') return json(202);
      if (req.url === '/v1.0/me/events') return json(201, { id: 'AAMkDelegated1' });
    }
    if (bearer !== 'app-only-token')
      return json(401, { error: { code: 'InvalidAuthenticationToken', message: 'x' } });
    if (/^\/v1\.0\/users\/[^/]+\/sendMail$/.test(req.url!)) return json(202);
    if (/^\/v1\.0\/users\/[^/]+\/events$/.test(req.url!)) return json(201, { id: 'AAMkAppOnly1' });
    json(404, { error: { code: 'ResourceNotFound', message: 'no such route' } });
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}
