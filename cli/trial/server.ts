import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { Env } from '../../lib/config.ts';
import { createPool, databaseConnectError, type Pool } from '../../lib/db.ts';
import { sendText } from '../../lib/http.ts';
import { drain, listen, onShutdown } from '../../lib/lifecycle.ts';
import { createLogger, type Logger } from '../../lib/logger.ts';
import { withDevSignIn } from '../dev/sign-in.ts';
import { loadTrialSignInConfig, type TrialSignInConfig } from './config.ts';

// The web application's tables, as `platform dev` creates them (it stands in for the web application too).
const AUTHJS_SCHEMA = new URL('../../idp/authjs/schema.sql', import.meta.url);

// The grants roles.sql gives once the web application's tables exist (docs/deploy.md § Database roles): the IdP
// reads the three, the tool servers `users` only. A role that does not exist (a database set up otherwise) is
// skipped.
const GRANTS: ReadonlyArray<{ role: string; sql: string }> = [
  { role: 'platform_idp', sql: 'GRANT SELECT ON users, accounts, sessions TO platform_idp' },
  { role: 'platform_tools', sql: 'GRANT SELECT ON users TO platform_tools' },
  { role: 'platform_tools', sql: 'REVOKE ALL ON accounts, sessions FROM platform_tools' },
];

export interface RunningTrialSignIn {
  port: number;
  close(): Promise<void>;
}

/**
 * Creates the web application's Auth.js tables in `public` (idempotent) with the platform roles' grants, then
 * serves the development sign-in page (cli/dev/sign-in.ts) on /api/auth/* and GET /health.
 */
export async function startTrialSignIn(
  config: TrialSignInConfig,
  o: { log: Logger; host?: string },
): Promise<RunningTrialSignIn> {
  const pool = createPool(config.databaseUrl, o.log, { max: 4, applicationName: 'platform-trial-sign-in' });
  // The superuser is called `platform`, like the platform's schema: "$user" would put these tables there.
  pool.on('connect', (client) => void client.query('SET search_path TO public').catch(() => {}));
  try {
    await prepareTables(pool);
  } catch (err) {
    await pool.end().catch(() => {});
    throw databaseConnectError(err, config.databaseUrl, 'DATABASE_URL');
  }
  const handler = withDevSignIn(
    {
      pool,
      issuer: config.issuer,
      authjs: {
        usersTable: 'users',
        accountsTable: 'accounts',
        sessionsTable: 'sessions',
        subjectProvider: 'microsoft-entra-id',
      },
      cookieName: config.cookieName,
      suggestedEmail: config.suggestedEmail,
      adminEmails: config.adminEmails,
      log: o.log,
    },
    (req, res) => {
      if (req.url === '/health' && (req.method === 'GET' || req.method === 'HEAD'))
        return sendText(res, 200, 'ok\n', { 'cache-control': 'no-store' });
      sendText(res, 404, 'Not found.\n');
    },
  );
  const server: Server = createServer(handler);
  let address: { port: number };
  try {
    address = await listen(server, config.port, o.host);
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  o.log.info(
    { port: address.port, issuer: config.issuer },
    'trial sign-in listening: NOT FOR PRODUCTION, anyone signs in as anyone',
  );
  return {
    port: address.port,
    async close() {
      await drain(server, 5_000);
      await pool.end();
    },
  };
}

async function prepareTables(pool: Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // One trial sign-in at a time creates them (two replicas starting together would race on CREATE TABLE).
    await client.query("SELECT pg_advisory_xact_lock(hashtext('platform-trial-authjs'))");
    await client.query(await readFile(AUTHJS_SCHEMA, 'utf8'));
    const { rows } = await client.query<{ rolname: string }>(
      'SELECT rolname FROM pg_roles WHERE rolname = ANY($1)',
      [[...new Set(GRANTS.map((g) => g.role))]],
    );
    const roles = new Set(rows.map((r) => r.rolname));
    for (const g of GRANTS) if (roles.has(g.role)) await client.query(g.sql);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** `platform trial-sign-in`: configuration from the environment only, validated before anything else. */
export async function main(env: Env): Promise<void> {
  const config = loadTrialSignInConfig(env);
  const log = createLogger({ name: 'trial-sign-in', level: config.logLevel });
  let running: RunningTrialSignIn | undefined;
  onShutdown(log, async () => {
    await running?.close();
  });
  running = await startTrialSignIn(config, { log });
}
