import { CONSENT_EXEMPT_CLIENTS } from '../consent.ts';
import { InvalidRequestError } from '../errors.ts';
import type { AdminHandler } from './route-table.ts';

type ClientKind = 'builtin' | 'registered' | 'metadata' | 'machine';

/** A Client ID Metadata Document client is named by its document's https URL. */
const kindOf = (clientId: string, type?: string): ClientKind =>
  type === 'machine'
    ? 'machine'
    : CONSENT_EXEMPT_CLIENTS.has(clientId)
      ? 'builtin'
      : clientId.startsWith('https://')
        ? 'metadata'
        : 'registered';

/**
 * GET /admin/api/clients → {"items": [{"client_id", "client_name", "kind", "redirect_uris", "created_at",
 * "consents"}]}: the stored clients (built in, registered), then metadata-document clients known only through
 * consents (their documents are fetched when used, not stored: redirect_uris and created_at are null).
 */
export const clientsRoute: AdminHandler = async ({ ctx }) => {
  const [{ rows }, consents] = await Promise.all([
    ctx.pool.query<{
      client_id: string;
      name: string;
      redirect_uris: string;
      type: string;
      created_at: Date;
    }>(
      'SELECT client_id, name, redirect_uris, type, created_at FROM platform.oauth_clients ORDER BY created_at, client_id',
    ),
    ctx.consents.countByClient(),
  ]);
  const items: Array<Record<string, unknown>> = rows.map((r) => ({
    client_id: r.client_id,
    client_name: r.name,
    kind: kindOf(r.client_id, r.type),
    redirect_uris: parseList(r.redirect_uris),
    created_at: r.created_at.toISOString(),
    consents: consents.get(r.client_id) ?? 0,
  }));
  const stored = new Set(rows.map((r) => r.client_id));
  for (const [clientId, n] of consents) {
    if (stored.has(clientId)) continue;
    items.push({
      client_id: clientId,
      client_name: null,
      kind: kindOf(clientId),
      redirect_uris: null,
      created_at: null,
      consents: n,
    });
  }
  return { body: { items }, audit: { detail: { clients: items.length } } };
};

function parseList(text: string): string[] {
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * GET /admin/api/keys → {"rotation": "auto"|"off", "items": [{"kid", "alg", "state", "signing", "origin",
 * "published_since", "activated_at", "retired_at", "unpublish_at", "withdrawn_at"}]}. Static keys: in
 * configuration order (the first signs, state `current`, the others `previous`). Rotated keys: every stored key,
 * withdrawn and expired ones included, by activation time (docs/admin.md § Signing keys).
 */
export const keysRoute: AdminHandler = async ({ ctx }) => {
  const items = await ctx.keyRing.listing();
  return {
    body: { rotation: ctx.keyRing.rotation ? 'auto' : 'off', items },
    audit: { detail: { keys: items.length } },
  };
};

/**
 * POST /admin/api/keys/rotate {"emergency"?: boolean} → {"kid", "created", "emergency", "publish_at",
 * "activate_at", "withdrawn"}. Planned: a next key is published now and signs after PLATFORM_KEY_PUBLISH_AHEAD
 * (one already pending is answered instead, `created: false`). Emergency: a new key signs at once and every other
 * published key is withdrawn. 409 `rotation_off` with static keys.
 */
export const rotateKeysRoute: AdminHandler = async ({ ctx, body: read, admin, x }) => {
  const body = await read();
  const emergency = body.emergency ?? false;
  if (typeof emergency !== 'boolean') throw new InvalidRequestError('emergency must be true or false');
  const out = await ctx.keyRing.rotate(emergency, {
    email: admin.email,
    sub: admin.sub,
    clientId: admin.clientId,
    requestId: x.requestId,
  });
  return { status: out.created ? 201 : 200, body: out, audit: { target: out.kid, detail: { ...out } } };
};
