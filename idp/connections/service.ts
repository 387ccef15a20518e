import { createHash, randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../../lib/db.ts';
import { ident } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';
import type { RevocationPublisher } from '../../lib/revocation.ts';
import type { IdpConfig } from '../config.ts';
import { TemporarilyUnavailableError } from '../errors.ts';
import type { FetchGate, OutboundBudget } from '../outbound/index.ts';
import { inTransaction, type Queryable } from '../store/transaction.ts';
import {
  type ConnectionConfig,
  ConnectionsFileError,
  type OAuthConnection,
  readConnectionsFile,
} from './file.ts';
import { GrantSealError, GrantSealer, type SealedGrant } from './seal.ts';
import type { Connections, ConnectionUser, UpstreamToken } from './types.ts';
import {
  createEndpointResolver,
  revokeAtUpstream,
  tokenRequest,
  type UpstreamEndpoints,
  UpstreamRefusedError,
  type UpstreamTokens,
  UpstreamUnavailableError,
} from './upstream.ts';

// The connections store (docs/connections.md): each user's upstream grant, sealed (seal.ts), refreshed when it
// expires within REFRESH_MARGIN_MS — once for concurrent callers: in this process one promise per user and
// connection, across replicas a row lock (and, before any row exists, an advisory lock) held while the upstream
// is asked. A grant the upstream refuses to refresh is dropped. No upstream token is ever logged or returned
// by anything but accessToken().

export const REFRESH_MARGIN_MS = 60_000;
/** The client_id the issuance audit names for what the IdP itself does at an upstream (connect, refresh). */
export const CONNECTIONS_AUDIT_CLIENT = 'platform-idp';
const LOCK_CLASS = 1_347_636_180;
const tokenHash = (v: string) => createHash('sha256').update(v, 'utf8').digest('base64');

/** One line of a user's connections, as the user, the admin API and the console see it: never a token. */
export interface ConnectionListing {
  name: string;
  kind: 'oauth' | 'entra';
  display_name: string;
  connected: boolean;
  connected_at: string | null;
  upstream_subject: string | null;
  scopes: string[];
  expires_at: string | null;
  connect_uri: string;
}

/** Who acted, for the audit row of a disconnect. */
export interface Actor {
  clientId: string;
  requestId?: string;
}

export interface ConnectionsService extends Connections {
  get(name: string): ConnectionConfig | undefined;
  /** `{issuer}/connections/<name>` (oauth) or PLATFORM_LOGIN_URL (entra). */
  connectUri(name: string): string;
  /** Every configured connection with this user's state of it. */
  list(user: ConnectionUser): Promise<ConnectionListing[]>;
  /** Drops the grant and revokes it at the upstream when it has a revocation endpoint. False: nothing was stored. */
  disconnect(
    user: ConnectionUser,
    name: string,
    actor: Actor,
  ): Promise<{ disconnected: boolean; revoked: boolean }>;
  /** An oauth connection's endpoints (configured, else discovered). */
  endpoints(c: OAuthConnection): Promise<UpstreamEndpoints>;
  /** The connect flow's last step: stores (replacing) the grant the upstream gave for the code. */
  store(
    user: ConnectionUser,
    c: ConnectionConfig,
    tokens: UpstreamTokens,
    event: 'connect' | 'refresh',
  ): Promise<void>;
  /** SIGHUP: re-reads the file; a bad one keeps the connections in force (one line). True when swapped. */
  reload(): Promise<boolean>;
}

interface Row {
  sealed: Buffer;
}

export function createConnections(o: {
  pool: Pool;
  config: IdpConfig;
  log: Logger;
  fetch?: typeof fetch;
  /** The IdP's outbound-fetch budget and its gate for fetches no request names (the upstream's host counted). */
  budget?: { outbound: OutboundBudget; gate: FetchGate };
  /** Tells the gateways of a disconnect, so that none serves the user's cached upstream token again. */
  revocations?: RevocationPublisher;
}): ConnectionsService {
  const { pool, config, log } = o;
  const cc = config.connections!;
  const fetchImpl = o.fetch ?? fetch;
  const sealer = new GrantSealer(cc.sealingSecret);
  let byName = new Map(cc.list.map((c) => [c.name, c]));
  const resolve = createEndpointResolver(fetchImpl, o.budget);
  const inFlight = new Map<string, Promise<UpstreamToken>>();
  const accounts = ident(config.authjs.accountsTable);
  let reloading: Promise<boolean> = Promise.resolve(true);

  const connectUri = (name: string) => {
    const c = byName.get(name);
    return c?.kind === 'entra' ? config.loginUrl : `${config.issuer}/connections/${encodeURIComponent(name)}`;
  };
  const notConnected = (name: string, description: string): UpstreamToken => ({
    ok: false,
    error: 'interaction_required',
    description,
    connectUri: connectUri(name),
  });
  const tokenEndpointOf = async (c: ConnectionConfig) =>
    c.kind === 'entra' ? c.tokenEndpoint : (await resolve(c)).tokenEndpoint;

  /** The grant as sealed for this row, or undefined when it does not open (logged, never used). */
  const open = (user: ConnectionUser, name: string, row: Row | undefined): SealedGrant | undefined => {
    if (!row) return undefined;
    try {
      return sealer.open(user.userId, name, row.sealed);
    } catch (err) {
      if (!(err instanceof GrantSealError)) throw err;
      log.warn({ connection: name, userId: user.userId }, err.message);
      return undefined;
    }
  };

  const audit = (
    q: Queryable,
    user: ConnectionUser,
    name: string,
    event: 'connect' | 'refresh' | 'disconnect',
    clientId: string,
    grant: { scope?: string; expiresAt?: number },
  ) =>
    q.query(
      `INSERT INTO platform.issuance_audit
              (issued_at, jti, grant_type, user_id, subject, email, client_id, scope, expires_at, connection)
       VALUES (now(), $1, $2, $3,
               coalesce((SELECT a."providerAccountId" FROM ${accounts} a
                          WHERE a."userId"::text = $3 AND a.provider = $8 ORDER BY a.id LIMIT 1), $3),
               $4, $5, $6, coalesce($7::timestamptz, now()), $9)`,
      [
        randomUUID(),
        `connection:${event}`,
        user.userId,
        user.email,
        clientId,
        grant.scope ?? '',
        grant.expiresAt === undefined ? null : new Date(grant.expiresAt),
        config.authjs.subjectProvider,
        name,
      ],
    );

  const write = async (
    q: Queryable,
    user: ConnectionUser,
    c: ConnectionConfig,
    g: SealedGrant,
    event: 'connect' | 'refresh',
  ) => {
    await q.query(
      `INSERT INTO platform.connection_grants
              (user_id, connection, email, sealed, scope, upstream_subject, expires_at, connected_at, refreshed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now(), NULL)
       ON CONFLICT (user_id, connection) DO UPDATE
          SET email = EXCLUDED.email, sealed = EXCLUDED.sealed, scope = EXCLUDED.scope,
              upstream_subject = EXCLUDED.upstream_subject, expires_at = EXCLUDED.expires_at,
              connected_at = CASE WHEN $8 THEN now() ELSE platform.connection_grants.connected_at END,
              refreshed_at = CASE WHEN $8 THEN NULL ELSE now() END`,
      [
        user.userId,
        c.name,
        user.email,
        sealer.seal(user.userId, c.name, g),
        g.scope ?? null,
        g.subject ?? null,
        g.expiresAt === undefined ? null : new Date(g.expiresAt),
        event === 'connect',
      ],
    );
    await audit(q, user, c.name, event, CONNECTIONS_AUDIT_CLIENT, g);
  };

  const usable = (g: SealedGrant) =>
    g.expiresAt === undefined || g.expiresAt - Date.now() > REFRESH_MARGIN_MS;
  const answer = (g: SealedGrant): UpstreamToken => ({
    ok: true,
    accessToken: g.accessToken,
    ...(g.expiresAt === undefined ? {} : { expiresAt: new Date(g.expiresAt) }),
    ...(g.scope === undefined ? {} : { scope: g.scope }),
  });

  /** Under the locks: the stored grant again (another replica may have refreshed it), refreshed when still due. */
  const refreshLocked = async (
    tx: PoolClient,
    user: ConnectionUser,
    c: ConnectionConfig,
  ): Promise<UpstreamToken> => {
    await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
      LOCK_CLASS,
      `${user.userId}\n${c.name}`,
    ]);
    const { rows } = await tx.query<Row>(
      'SELECT sealed FROM platform.connection_grants WHERE user_id = $1 AND connection = $2 FOR UPDATE',
      [user.userId, c.name],
    );
    const stored = open(user, c.name, rows[0]);
    if (rows[0] && !stored)
      return notConnected(c.name, `the stored grant of ${c.name} is unusable; connect again`);
    if (stored && usable(stored)) return answer(stored);
    let refreshToken = stored?.refreshToken;
    let firstRedemption = false;
    if (!stored) {
      if (c.kind !== 'entra') return notConnected(c.name, `the user has not connected ${c.name}`);
      // entra: the web application's sign-in left a refresh token in the user's Auth.js account; only read here.
      const acc = await tx.query<{ refresh_token: string | null }>(
        `SELECT refresh_token FROM ${accounts} WHERE "userId"::text = $1 AND provider = $2 ORDER BY id LIMIT 1`,
        [user.userId, config.authjs.subjectProvider],
      );
      refreshToken = acc.rows[0]?.refresh_token ?? undefined;
      if (!refreshToken)
        return notConnected(c.name, `the user's sign-in holds no refresh token for ${c.name}; sign in again`);
      const declined = await tx.query(
        `SELECT 1 FROM platform.connection_declines
          WHERE user_id = $1 AND connection = $2 AND account_token_hash = $3`,
        [user.userId, c.name, tokenHash(refreshToken)],
      );
      if ((declined.rowCount ?? 0) > 0)
        return notConnected(c.name, `${c.name} was disconnected; sign in again to connect it`);
      firstRedemption = true;
    }
    if (!refreshToken) {
      await tx.query('DELETE FROM platform.connection_grants WHERE user_id = $1 AND connection = $2', [
        user.userId,
        c.name,
      ]);
      return notConnected(c.name, `the grant of ${c.name} expired and cannot be refreshed; connect again`);
    }
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken });
    if (c.kind === 'entra') form.set('scope', c.scopes.join(' '));
    else if (c.resource) form.set('resource', c.resource);
    let t: UpstreamTokens;
    try {
      t = await tokenRequest(c, await tokenEndpointOf(c), form, fetchImpl);
    } catch (err) {
      if (!(err instanceof UpstreamRefusedError)) throw err;
      log.warn({ connection: c.name, userId: user.userId, error: err.error }, 'upstream refused the refresh');
      if (!firstRedemption) {
        await tx.query('DELETE FROM platform.connection_grants WHERE user_id = $1 AND connection = $2', [
          user.userId,
          c.name,
        ]);
        await audit(tx, user, c.name, 'disconnect', CONNECTIONS_AUDIT_CLIENT, {});
      }
      return notConnected(
        c.name,
        `the upstream of ${c.name} refused the stored grant (${err.error}); connect again`,
      );
    }
    const next: SealedGrant = {
      accessToken: t.accessToken,
      // Entra and other servers rotate refresh tokens; one that does not send a new one keeps the old valid.
      ...((t.refreshToken ?? refreshToken) ? { refreshToken: t.refreshToken ?? refreshToken } : {}),
      ...(t.expiresAt === undefined ? {} : { expiresAt: t.expiresAt }),
      ...((t.scope ?? stored?.scope) === undefined ? {} : { scope: t.scope ?? stored?.scope }),
      ...((t.subject ?? stored?.subject) === undefined ? {} : { subject: t.subject ?? stored?.subject }),
    };
    await write(tx, user, c, next, firstRedemption ? 'connect' : 'refresh');
    if (firstRedemption)
      await tx.query('DELETE FROM platform.connection_declines WHERE user_id = $1 AND connection = $2', [
        user.userId,
        c.name,
      ]);
    log.info(
      { connection: c.name, userId: user.userId },
      firstRedemption ? 'connection redeemed' : 'connection refreshed',
    );
    return answer(next);
  };

  const service: ConnectionsService = {
    has: (name) => byName.has(name),
    get: (name) => byName.get(name),
    connectUri,
    endpoints: (c) => resolve(c),

    async accessToken(user, name) {
      const c = byName.get(name);
      if (!c) return notConnected(name, `no connection ${name} is configured`);
      const { rows } = await pool.query<Row>(
        'SELECT sealed FROM platform.connection_grants WHERE user_id = $1 AND connection = $2',
        [user.userId, name],
      );
      const stored = open(user, name, rows[0]);
      if (rows[0] && !stored)
        return notConnected(name, `the stored grant of ${name} is unusable; connect again`);
      if (stored && usable(stored)) return answer(stored);
      if (!stored && c.kind === 'oauth') return notConnected(name, `the user has not connected ${name}`);
      const key = `${user.userId}\n${name}`;
      let p = inFlight.get(key);
      if (!p) {
        p = inTransaction(pool, (tx) => refreshLocked(tx, user, c))
          .catch((err: unknown) => {
            // Nothing is dropped when the upstream cannot be reached: the caller may retry (503 at the token endpoint).
            if (!(err instanceof UpstreamUnavailableError)) throw err;
            log.warn(
              { connection: name, userId: user.userId, reason: err.message },
              'connection refresh failed',
            );
            throw new TemporarilyUnavailableError(
              `the upstream of connection ${name} cannot be reached; retry shortly`,
            );
          })
          .finally(() => inFlight.delete(key));
        inFlight.set(key, p);
      }
      return p;
    },

    async store(user, c, t, event) {
      const g: SealedGrant = {
        accessToken: t.accessToken,
        ...(t.refreshToken === undefined ? {} : { refreshToken: t.refreshToken }),
        ...(t.expiresAt === undefined ? {} : { expiresAt: t.expiresAt }),
        ...(t.scope === undefined ? {} : { scope: t.scope }),
        ...(t.subject === undefined ? {} : { subject: t.subject }),
      };
      await inTransaction(pool, (tx) => write(tx, user, c, g, event));
    },

    async list(user) {
      const { rows } = await pool.query<{
        connection: string;
        scope: string | null;
        upstream_subject: string | null;
        expires_at: Date | null;
        connected_at: Date;
      }>(
        `SELECT connection, scope, upstream_subject, expires_at, connected_at
           FROM platform.connection_grants WHERE user_id = $1`,
        [user.userId],
      );
      const found = new Map(rows.map((r) => [r.connection, r]));
      // An entra connection not yet redeemed is connected when the user's sign-in left a refresh token to redeem.
      const signedIn = new Set<string>();
      if ([...byName.values()].some((c) => c.kind === 'entra' && !found.has(c.name))) {
        const acc = await pool.query<{ h: string }>(
          `SELECT encode(sha256(convert_to(refresh_token, 'UTF8')), 'base64') AS h FROM ${accounts}
            WHERE "userId"::text = $1 AND provider = $2 AND refresh_token IS NOT NULL ORDER BY id LIMIT 1`,
          [user.userId, config.authjs.subjectProvider],
        );
        const declined = await pool.query<{ connection: string; account_token_hash: string }>(
          'SELECT connection, account_token_hash FROM platform.connection_declines WHERE user_id = $1',
          [user.userId],
        );
        const h = acc.rows[0]?.h;
        if (h !== undefined)
          for (const c of byName.values())
            if (
              c.kind === 'entra' &&
              !declined.rows.some((d) => d.connection === c.name && d.account_token_hash === h)
            )
              signedIn.add(c.name);
      }
      return [...byName.values()].map((c) => {
        const r = found.get(c.name);
        return {
          name: c.name,
          kind: c.kind,
          display_name: c.displayName,
          connected: r !== undefined || signedIn.has(c.name),
          connected_at: r ? r.connected_at.toISOString() : null,
          upstream_subject: r?.upstream_subject ?? null,
          scopes: r?.scope ? r.scope.split(' ').filter(Boolean) : [],
          expires_at: r?.expires_at ? r.expires_at.toISOString() : null,
          connect_uri: connectUri(c.name),
        };
      });
    },

    async disconnect(user, name, actor) {
      const c = byName.get(name);
      const dropped = await inTransaction(pool, async (tx) => {
        const { rows } = await tx.query<Row>(
          'DELETE FROM platform.connection_grants WHERE user_id = $1 AND connection = $2 RETURNING sealed',
          [user.userId, name],
        );
        let declined = 0;
        if (c?.kind === 'entra') {
          // The web sign-in's refresh token would connect it again at the next use: it is not redeemed again.
          const d = await tx.query(
            `INSERT INTO platform.connection_declines (user_id, connection, account_token_hash)
             SELECT $1, $2, encode(sha256(convert_to(refresh_token, 'UTF8')), 'base64')
               FROM ${accounts} WHERE "userId"::text = $1 AND provider = $3 AND refresh_token IS NOT NULL
              ORDER BY id LIMIT 1
             ON CONFLICT (user_id, connection)
             DO UPDATE SET account_token_hash = EXCLUDED.account_token_hash, declined_at = now()
              WHERE platform.connection_declines.account_token_hash <> EXCLUDED.account_token_hash`,
            [user.userId, name, config.authjs.subjectProvider],
          );
          declined = d.rowCount ?? 0;
        }
        if (rows.length === 0 && declined === 0) return undefined;
        await audit(tx, user, name, 'disconnect', actor.clientId, {});
        return rows[0] ? (open(user, name, rows[0]) ?? null) : null;
      });
      if (dropped === undefined) return { disconnected: false, revoked: false };
      // Before the upstream is asked: a gateway's cached token must not outlive the grant, whatever the upstream
      // does with the revocation (a self-contained token stays valid there until it expires).
      await o.revocations?.dropConnection(user.email, name).catch((err: Error) => {
        log.warn(
          { connection: name, userId: user.userId, err: { message: err.message } },
          'gateways not told of the disconnect; their cached token ends when it expires or the upstream refuses it',
        );
      });
      let revoked = false;
      if (c?.kind === 'oauth' && dropped !== null) {
        try {
          const { revocationEndpoint } = await resolve(c);
          if (revocationEndpoint) {
            // The refresh token first: revoking it ends the grant (RFC 7009 §2.1) and, at most servers, its access tokens.
            const token = dropped.refreshToken ?? dropped.accessToken;
            const hint = dropped.refreshToken ? 'refresh_token' : 'access_token';
            revoked = await revokeAtUpstream(c, revocationEndpoint, token, hint, fetchImpl);
            if (dropped.refreshToken)
              await revokeAtUpstream(c, revocationEndpoint, dropped.accessToken, 'access_token', fetchImpl);
          }
        } catch (err) {
          if (!(err instanceof UpstreamUnavailableError)) throw err;
          log.warn(
            { connection: name, reason: err.message },
            'upstream revocation failed; the grant is dropped here',
          );
        }
      }
      log.info(
        { connection: name, userId: user.userId, by: actor.clientId, revoked },
        'connection disconnected',
      );
      return { disconnected: true, revoked };
    },

    reload() {
      reloading = reloading.then(async () => {
        try {
          const list = readConnectionsFile(cc.file);
          byName = new Map(list.map((c) => [c.name, c]));
          log.info({ file: cc.file, connections: list.length }, 'connections reloaded');
          return true;
        } catch (err) {
          const message = err instanceof ConnectionsFileError ? err.message : (err as Error).message;
          log.error(
            { file: cc.file },
            `connections not reloaded, the previous ones stay in force: ${message}`,
          );
          return false;
        }
      });
      return reloading;
    },
  };
  return service;
}
