import type { Command } from 'commander';
import { Redis } from 'ioredis';
import { listAudit } from '../idp/store/audit.ts';
import { createRefreshTokenStore } from '../idp/store/refresh-tokens.ts';
import { ConfigError, databaseUrl, type Env, redisUrl } from '../lib/config.ts';
import { createPool } from '../lib/db.ts';
import { createLogger } from '../lib/logger.ts';
import { RedisRevocationPublisher } from '../lib/revocation.ts';
import { processEnv } from './config.ts';

const ACCESS_TTL_SECONDS = 3600;

async function withDeps<T>(
  env: Env,
  needRedis: boolean,
  fn: (d: { pool: ReturnType<typeof createPool>; publisher?: RedisRevocationPublisher }) => Promise<T>,
) {
  const log = createLogger({ name: 'admin', level: 'warn' });
  const pool = createPool(databaseUrl(env), log, { max: 2 });
  let redis: Redis | undefined;
  try {
    let publisher: RedisRevocationPublisher | undefined;
    if (needRedis) {
      const url = redisUrl(env);
      if (!url) throw new ConfigError('REDIS_URL', 'is required (revocations are published through Redis)');
      redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
      await redis.connect();
      publisher = new RedisRevocationPublisher(redis);
    }
    return await fn({ pool, publisher });
  } finally {
    await pool.end();
    redis?.disconnect();
  }
}

/** `platform admin revoke-user | revoke-token | audit`: instant revocation through Redis, audit listing. */
export function registerAdmin(program: Command): void {
  const admin = program.command('admin').description('administrative revocation and audit');

  admin
    .command('revoke-user')
    .description('revoke every token of a user: refresh tokens in the database, access tokens by a cut-off')
    .requiredOption('--email <email>', 'the user whose tokens are revoked')
    .action(async (opts: { email: string }) => {
      const email = opts.email.trim().toLowerCase();
      await withDeps(processEnv(), true, async ({ pool, publisher }) => {
        const { rows } = await pool.query<{ subject: string }>(
          `SELECT DISTINCT subject FROM platform.refresh_tokens WHERE email = $1
           UNION SELECT DISTINCT subject FROM platform.issuance_audit
            WHERE email = $1 AND issued_at > now() - make_interval(secs => $2)`,
          [email, ACCESS_TTL_SECONDS + 120],
        );
        if (rows.length === 0) {
          process.stdout.write(`no tokens were issued to ${email}; nothing to revoke\n`);
          return;
        }
        const store = createRefreshTokenStore(pool);
        const cutoff = Math.floor(Date.now() / 1000);
        let refresh = 0;
        for (const { subject } of rows) {
          refresh += await store.revokeSubject(subject, 'admin revoke-user');
          await publisher!.denySubject(subject, cutoff);
        }
        process.stdout.write(
          `revoked ${email}: ${refresh} refresh token(s); access tokens issued at or before ${new Date(cutoff * 1000).toISOString()} rejected (sub ${rows.map((r) => r.subject).join(', ')})\n`,
        );
      });
    });

  admin
    .command('revoke-token')
    .description('put one access token id on the denylist')
    .requiredOption('--jti <jti>', 'the token id (jti claim)')
    .action(async (opts: { jti: string }) => {
      await withDeps(processEnv(), true, async ({ pool, publisher }) => {
        const { rows } = await pool.query<{ exp: number }>(
          'SELECT extract(epoch FROM expires_at)::bigint AS exp FROM platform.issuance_audit WHERE jti::text = $1',
          [opts.jti],
        );
        // Unknown to the audit (another issuer's token): deny for the longest lifetime a token can have.
        const exp = rows[0] ? Number(rows[0].exp) : Math.floor(Date.now() / 1000) + ACCESS_TTL_SECONDS + 60;
        await publisher!.denyJti(opts.jti, exp);
        process.stdout.write(`revoked jti ${opts.jti} until ${new Date(exp * 1000).toISOString()}\n`);
      });
    });

  admin
    .command('audit')
    .description('list issuance audit records, newest first')
    .option('--email <email>', 'only this user')
    .option('--limit <n>', 'at most this many rows', '50')
    .option('--json', 'one JSON object per line')
    .action(async (opts: { email?: string; limit: string; json?: boolean }) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new Error('--limit must be 1..10000');
      await withDeps(processEnv(), false, async ({ pool }) => {
        const rows = await listAudit(pool, { email: opts.email, limit });
        if (opts.json) {
          for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`);
          return;
        }
        process.stdout.write(
          'issued_at                 grant               client                 email / sub / jti / scope\n',
        );
        for (const r of rows) {
          process.stdout.write(
            `${r.issuedAt}  ${r.grantType.padEnd(18)}  ${r.clientId.padEnd(21)}  ${r.email}  ${r.subject}  ${r.jti}  ${r.scope}\n`,
          );
        }
      });
    });
}
