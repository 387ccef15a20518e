import { ConfigError } from '../../lib/config.ts';
import type { Pool } from '../../lib/db.ts';
import { decodeEntitlements, type Identity } from '../../lib/identity.ts';
import { ToolError } from '../kit/tool-errors.ts';

// Entity grants at the deals server (docs/tools.md § Entity grants). With PLATFORM_ENTITY_ENFORCEMENT=on a call
// on a deal needs `read` (or `write`) on the deal's entity, `write` to propose a closure, as the token's `ent`
// claim says (forwarded under identity signature v3); otherwise `ent` is ignored. A deal's entity is
// `deal:<deal_id>`, or what DEALS_ENTITY_SQL answers for it (falling back to `deal:<deal_id>` when no row).

export type Need = 'read' | 'write';

export interface DealEntities {
  /** Throws `entity_forbidden` when enforcement is on and the caller lacks `need` on the deal's entity. */
  require(identity: Identity, dealId: string, need: Need): Promise<void>;
}

const OFF: DealEntities = { require: async () => {} };

/** Checks DEALS_ENTITY_SQL against the database once, before the server listens (parses, one column). */
export async function createDealEntities(
  pool: Pool,
  opts: { enforcement: boolean; sql: string | undefined },
): Promise<DealEntities> {
  const { sql } = opts;
  if (sql !== undefined) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN READ ONLY');
      const r = await client.query({ text: sql, values: [null], rowMode: 'array' });
      if (r.fields.length !== 1)
        throw new ConfigError(
          'DEALS_ENTITY_SQL',
          `must return one column (the entity key), returns ${r.fields.length}`,
        );
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError('DEALS_ENTITY_SQL', `the database refuses it: ${(err as Error).message}`);
    } finally {
      await client.query('ROLLBACK').catch(() => {});
      client.release();
    }
  }
  if (!opts.enforcement) return OFF;

  async function entityOf(dealId: string): Promise<string> {
    if (sql === undefined) return `deal:${dealId}`;
    const { rows } = await pool.query<unknown[]>({ text: sql, values: [dealId], rowMode: 'array' });
    const v = rows[0]?.[0];
    return v === null || v === undefined || String(v) === '' ? `deal:${dealId}` : String(v);
  }

  return {
    async require(identity, dealId, need) {
      const entity = await entityOf(dealId);
      const ent = decodeEntitlements(identity);
      const held = ent?.[entity];
      const perms = Array.isArray(held) ? held : [];
      const ok =
        need === 'write' ? perms.includes('write') : perms.includes('read') || perms.includes('write');
      if (ok) return;
      const why =
        identity.entitlements === undefined
          ? ' (the gateway signed no entitlements: identity signature v2)'
          : ent === undefined
            ? ' (the token carries no entity grants; with more than PLATFORM_ENT_MAX it carries none)'
            : '';
      throw new ToolError(
        'entity_forbidden',
        `${need} on ${entity} is required for this call and is not granted to ${identity.email}${why}; ` +
          'an administrator grants it with platform admin grant --entity',
        403,
      );
    },
  };
}
