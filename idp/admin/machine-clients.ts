import { InvalidRequestError, NotFoundError } from '../errors.ts';
import { addMachineClient, parseNewMachineClient } from '../machine-clients/index.ts';
import type { AdminHandler } from './route-table.ts';

const CLIENT_ID = /^[\x21-\x7E]{1,256}$/;

/**
 * POST /admin/api/clients {"name", "jwks" | "jwks_uri", "email", "services", "workload_issuer"?,
 * "workload_subject"?, "may_act"?} → 201 {"client_id", "client_name", "email", "services", …, "may_act"}: registers
 * a machine client (`may_act`: it may exchange users' tokens for delegated ones, idp/token-exchange).
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
    may_act: c.mayAct,
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

/**
 * GET /admin/api/machine-clients → {"items": [{"client_id", "client_name", "email", "services",
 * "workload_issuer", "workload_subject", "may_act", "created_at", "created_by", "revoked_at", "revoked_by",
 * "last_issued_at"}]}: every machine client, live ones first, newest first.
 */
export const listMachineClientsRoute: AdminHandler = async ({ ctx }) => {
  const { rows } = await ctx.pool.query<{
    client_id: string;
    name: string;
    email: string;
    services: string[];
    workload_issuer: string | null;
    workload_subject: string | null;
    may_act: boolean;
    created_at: Date;
    created_by: string;
    revoked_at: Date | null;
    revoked_by: string | null;
    last_issued_at: Date | null;
  }>(
    `SELECT m.client_id, c.name, m.email, m.services, m.workload_issuer, m.workload_subject, m.may_act, m.created_at,
            m.created_by, m.revoked_at, m.revoked_by,
            (SELECT max(a.issued_at) FROM platform.issuance_audit a WHERE a.client_id = m.client_id) AS last_issued_at
       FROM platform.machine_clients m JOIN platform.oauth_clients c USING (client_id)
      ORDER BY m.revoked_at IS NOT NULL, m.created_at DESC, m.client_id`,
  );
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  const items = rows.map((r) => ({
    client_id: r.client_id,
    client_name: r.name,
    email: r.email,
    services: r.services,
    workload_issuer: r.workload_issuer,
    workload_subject: r.workload_subject,
    may_act: r.may_act,
    created_at: r.created_at.toISOString(),
    created_by: r.created_by,
    revoked_at: iso(r.revoked_at),
    revoked_by: r.revoked_by,
    last_issued_at: iso(r.last_issued_at),
  }));
  return { body: { items }, audit: { detail: { machine_clients: items.length } } };
};
