import { InvalidRequestError, NotFoundError } from '../errors.ts';
import { addMachineClient, parseNewMachineClient } from '../machine-clients/index.ts';
import type { AdminHandler } from './route-table.ts';

const CLIENT_ID = /^[\x21-\x7E]{1,256}$/;

/**
 * POST /admin/api/clients {"name", "jwks" | "jwks_uri", "email", "services", "workload_issuer"?,
 * "workload_subject"?} → 201 {"client_id", "client_name", "email", "services", …}: registers a machine client.
 */
export const addMachineClientRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const c = parseNewMachineClient(await read(), ctx.config.services);
  const clientId = await addMachineClient(ctx, c, `admin:${admin.email}`);
  const out = {
    client_id: clientId,
    client_name: c.name,
    email: c.email,
    services: c.services,
    ...(c.jwksUri ? { jwks_uri: c.jwksUri } : {}),
    ...(c.workloadIssuer ? { workload_issuer: c.workloadIssuer, workload_subject: c.workloadSubject } : {}),
  };
  return { status: 201, body: out, audit: { target: clientId, email: c.email, detail: out } };
};

/** POST /admin/api/revoke-client {"client_id"} → {"client_id", "revoked": true, "cutoff"}; 404 if unknown. */
export const revokeClientRoute: AdminHandler = async ({ ctx, body: read, admin }) => {
  const body = await read();
  const clientId = body.client_id;
  if (typeof clientId !== 'string' || !CLIENT_ID.test(clientId))
    throw new InvalidRequestError('client_id must be 1-256 printable characters without white space');
  const r = await ctx.revocation.revokeClient({ clientId, by: `admin:${admin.email}` });
  if (!r) throw new NotFoundError(`no machine client ${clientId}`);
  const out = { client_id: clientId, revoked: true, cutoff: r.cutoff };
  return { body: out, audit: { target: clientId, detail: out } };
};
