import type { Pool } from '../../lib/db.ts';

/**
 * One user's consent to one client: the services and the administrative scopes (`mail:send_as`) approved
 * (each the union of every approval), and when.
 */
export interface Consent {
  clientId: string;
  clientName: string;
  services: string[];
  scopes: string[];
  grantedAt: Date;
}

export interface ConsentStore {
  /** The stored consent of `email` to `clientId`, if any. */
  find(q: { email: string; clientId: string }): Promise<Consent | undefined>;
  /**
   * Records an approval: the stored services (and administrative scopes) become the union of the stored and
   * the approved ones, the client name the one shown on the page, granted_at now.
   */
  grant(g: {
    email: string;
    clientId: string;
    clientName: string;
    services: readonly string[];
    scopes?: readonly string[];
  }): Promise<Consent>;
  /** Every consent the user has given, newest first. */
  list(q: { email: string }): Promise<Consent[]>;
  /** Withdraws one consent; true when there was one. The next authorization asks again. */
  withdraw(q: { email: string; clientId: string }): Promise<boolean>;
  /** Consents per client, for the client list. */
  countByClient(): Promise<Map<string, number>>;
}

interface Row {
  client_id: string;
  client_name: string;
  services: string[];
  scopes: string[];
  granted_at: Date;
}

const toConsent = (r: Row): Consent => ({
  clientId: r.client_id,
  clientName: r.client_name,
  services: r.services,
  scopes: r.scopes,
  grantedAt: r.granted_at,
});

const COLUMNS = 'client_id, client_name, services, scopes, granted_at';

const norm = (email: string) => email.trim().toLowerCase();

export function createConsentStore(pool: Pool): ConsentStore {
  return {
    async find({ email, clientId }) {
      const { rows } = await pool.query<Row>({
        name: 'consent_find',
        text: `SELECT ${COLUMNS} FROM platform.oauth_consents WHERE email = $1 AND client_id = $2`,
        values: [norm(email), clientId],
      });
      return rows[0] ? toConsent(rows[0]) : undefined;
    },
    async grant({ email, clientId, clientName, services, scopes = [] }) {
      const { rows } = await pool.query<Row>({
        name: 'consent_grant',
        text: `INSERT INTO platform.oauth_consents AS c (email, client_id, client_name, services, scopes, granted_at)
               VALUES ($1, $2, $3, $4::text[], $5::text[], now())
               ON CONFLICT (email, client_id) DO UPDATE
                 SET client_name = EXCLUDED.client_name,
                     services = ARRAY(SELECT DISTINCT s FROM unnest(c.services || EXCLUDED.services) AS s ORDER BY s),
                     scopes = ARRAY(SELECT DISTINCT s FROM unnest(c.scopes || EXCLUDED.scopes) AS s ORDER BY s),
                     granted_at = now()
               RETURNING ${COLUMNS}`,
        values: [
          norm(email),
          clientId,
          clientName,
          [...new Set(services)].sort(),
          [...new Set(scopes)].sort(),
        ],
      });
      return toConsent(rows[0]!);
    },
    async list({ email }) {
      const { rows } = await pool.query<Row>({
        name: 'consent_list',
        text: `SELECT ${COLUMNS} FROM platform.oauth_consents
                WHERE email = $1 ORDER BY granted_at DESC, client_id`,
        values: [norm(email)],
      });
      return rows.map(toConsent);
    },
    async withdraw({ email, clientId }) {
      const r = await pool.query({
        name: 'consent_withdraw',
        text: 'DELETE FROM platform.oauth_consents WHERE email = $1 AND client_id = $2',
        values: [norm(email), clientId],
      });
      return (r.rowCount ?? 0) > 0;
    },
    async countByClient() {
      const { rows } = await pool.query<{ client_id: string; n: string }>(
        'SELECT client_id, count(*) AS n FROM platform.oauth_consents GROUP BY client_id',
      );
      return new Map(rows.map((r) => [r.client_id, Number(r.n)]));
    },
  };
}
