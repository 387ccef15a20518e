import type { Pool, PoolClient } from '../../lib/db.ts';
import { inTransaction } from '../store/transaction.ts';
import type { PublicJwk } from '../tokens/keys.ts';

/** A row of platform.rotating_keys (migration 120); times in ms since the epoch. */
export interface StoredKey {
  kid: string;
  publicJwk: PublicJwk;
  sealed: Buffer;
  origin: KeyOrigin;
  createdAt: number;
  publishAt: number;
  activateAt: number;
  withdrawnAt: number | undefined;
  activationLogged: boolean;
  retirementLogged: boolean;
}

export type KeyOrigin = 'initial' | 'imported' | 'schedule' | 'planned' | 'emergency';

export interface NewKey {
  kid: string;
  publicJwk: PublicJwk;
  sealed: Buffer;
  origin: KeyOrigin;
  publishAt: number;
  activateAt: number;
}

/** Transitions (key creation, withdrawal, the audit of activations) are made by one replica at a time. */
const ROTATION_LOCK = 'pg_advisory_xact_lock(1347636044, 1)';

type Q = Pick<PoolClient, 'query'>;

export function createRotatingKeyStore(pool: Pool) {
  const read = async (q: Q): Promise<StoredKey[]> => {
    const { rows } = await q.query<{
      kid: string;
      public_jwk: PublicJwk;
      private_key: Buffer;
      origin: KeyOrigin;
      created_at: Date;
      publish_at: Date;
      activate_at: Date;
      withdrawn_at: Date | null;
      activation_logged: boolean;
      retirement_logged: boolean;
    }>(
      `SELECT kid, public_jwk, private_key, origin, created_at, publish_at, activate_at, withdrawn_at,
              activation_logged, retirement_logged
         FROM platform.rotating_keys ORDER BY activate_at, kid`,
    );
    return rows.map((r) => ({
      kid: r.kid,
      publicJwk: r.public_jwk,
      sealed: r.private_key,
      origin: r.origin,
      createdAt: r.created_at.getTime(),
      publishAt: r.publish_at.getTime(),
      activateAt: r.activate_at.getTime(),
      withdrawnAt: r.withdrawn_at?.getTime(),
      activationLogged: r.activation_logged,
      retirementLogged: r.retirement_logged,
    }));
  };
  return {
    /** Every key, withdrawn ones included (a few dozen rows at most: read on a poll, never per grant). */
    list: () => read(pool),
    /**
     * Runs `fn` holding the rotation lock, on the rows as they are once it is held. `wait: false` gives up at
     * once (undefined) when another replica holds it: the periodic check simply runs again later.
     */
    locked<T>(wait: boolean, fn: (tx: TxKeys) => Promise<T>): Promise<T | undefined> {
      return inTransaction(pool, async (client) => {
        if (wait) await client.query(`SELECT ${ROTATION_LOCK}`);
        else {
          const { rows } = await client.query<{ ok: boolean }>(
            `SELECT pg_try_advisory_xact_lock(1347636044, 1) AS ok`,
          );
          // Nothing was done: the empty transaction ends.
          if (!rows[0]?.ok) return undefined;
        }
        return fn(txKeys(client, await read(client)));
      });
    },
  };
}

export type RotatingKeyStore = ReturnType<typeof createRotatingKeyStore>;

export interface TxKeys {
  rows: StoredKey[];
  client: PoolClient;
  insert(k: NewKey): Promise<void>;
  withdraw(kids: readonly string[], at: number): Promise<void>;
  markLogged(kid: string, what: 'activation' | 'retirement'): Promise<void>;
}

function txKeys(client: PoolClient, rows: StoredKey[]): TxKeys {
  return {
    rows,
    client,
    async insert(k) {
      await client.query(
        `INSERT INTO platform.rotating_keys (kid, public_jwk, private_key, origin, publish_at, activate_at)
         VALUES ($1, $2, $3, $4, to_timestamp($5 / 1000.0), to_timestamp($6 / 1000.0))`,
        [k.kid, JSON.stringify(k.publicJwk), k.sealed, k.origin, k.publishAt, k.activateAt],
      );
    },
    async withdraw(kids, at) {
      await client.query(
        `UPDATE platform.rotating_keys SET withdrawn_at = to_timestamp($2 / 1000.0)
          WHERE kid = ANY($1::text[]) AND withdrawn_at IS NULL`,
        [kids, at],
      );
    },
    async markLogged(kid, what) {
      await client.query(
        `UPDATE platform.rotating_keys SET ${what === 'activation' ? 'activation_logged' : 'retirement_logged'} = true
          WHERE kid = $1`,
        [kid],
      );
    },
  };
}
