import type { ConnectionListing } from '../connections/service.ts';
import { InvalidRequestError, NotFoundError } from '../errors.ts';
import { EMAIL } from './revoke.ts';
import type { AdminHandler, AdminRequest } from './route-table.ts';

// A user's connections (docs/connections.md § Managing), never a token:
//   GET  /admin/api/connections?email=E                 → {"email", "connections": [{"name", "kind", "connected", …}]}
//   POST /admin/api/disconnect {"email", "connection"}  → {"email", "connection", "disconnected", "revoked"}

function connections(r: AdminRequest) {
  if (!r.ctx.connections)
    throw new NotFoundError('no connections are configured (PLATFORM_CONNECTIONS_FILE)');
  return r.ctx.connections;
}

function checkedEmail(v: unknown): string {
  const email = typeof v === 'string' ? v.trim().toLowerCase() : undefined;
  if (!email || !EMAIL.test(email)) throw new InvalidRequestError('email must be an email address');
  return email;
}

export const listConnectionsRoute: AdminHandler = async (r) => {
  const svc = connections(r);
  const email = checkedEmail(r.query.get('email'));
  const users = await r.ctx.sessions.findUsersByEmail(email);
  const lists = await Promise.all(users.map((u) => svc.list({ userId: u.userId, email: u.email })));
  // A person with several user rows of one email (rare): a connection counts as connected if any row has it.
  const merged = new Map<string, ConnectionListing>();
  for (const item of lists.flat()) {
    const had = merged.get(item.name);
    if (!had || (!had.connected && item.connected)) merged.set(item.name, item);
  }
  const out = { email, connections: [...merged.values()] };
  return {
    body: out,
    audit: { target: email, email, detail: { connected: out.connections.filter((c) => c.connected).length } },
  };
};

export const disconnectRoute: AdminHandler = async (r) => {
  const svc = connections(r);
  const body = await r.body();
  const email = checkedEmail(body.email);
  const name = body.connection;
  if (typeof name !== 'string' || !svc.has(name))
    throw new InvalidRequestError('connection must name a configured connection');
  const users = await r.ctx.sessions.findUsersByEmail(email);
  let disconnected = false;
  let revoked = false;
  for (const u of users) {
    const d = await svc.disconnect({ userId: u.userId, email: u.email }, name, {
      clientId: r.admin.clientId,
      requestId: r.x.requestId,
    });
    disconnected ||= d.disconnected;
    revoked ||= d.revoked;
  }
  const out = { email, connection: name, disconnected, revoked };
  return { body: out, audit: { target: email, email, detail: out } };
};
