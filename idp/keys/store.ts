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
  /** The schedule's seal (crypto.ts ScheduleMac); undefined for a row the previous release wrote. */
  scheduleMac: Buffer | undefined;
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
  scheduleMac: Buffer;
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
      schedule_mac: Buffer | null;
      activation_logged: boolean;
      retirement_logged: boolean;
    }>(
      `SELECT kid, public_jwk, private_key, origin, created_at, publish_at, activate_at, withdrawn_at,
              schedule_mac, activation_logged, retirement_logged
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
      scheduleMac: r.schedule_mac ?? undefined,
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
  /** Withdraws each kid at `at`, writing its new schedule seal. */
  withdraw(withdrawn: ReadonlyArray<{ kid: string; scheduleMac: Buffer }>, at: number): Promise<void>;
  /** Seals the schedule of a row the previous release wrote (left alone when it has a seal meanwhile). */
  adopt(kid: string, scheduleMac: Buffer): Promise<void>;
  markLogged(kid: string, what: 'activation' | 'retirement'): Promise<void>;
}

function txKeys(client: PoolClient, rows: StoredKey[]): TxKeys {
  return {
    rows,
    client,
    async insert(k) {
      await client.query(
        `INSERT INTO platform.rotating_keys (kid, public_jwk, private_key, origin, publish_at, activate_at,
                                             schedule_mac)
         VALUES ($1, $2, $3, $4, $5::timestamptz, $6::timestamptz, $7)`,
        [
          k.kid,
          JSON.stringify(k.publicJwk),
          k.sealed,
          k.origin,
          new Date(k.publishAt).toISOString(),
          new Date(k.activateAt).toISOString(),
          k.scheduleMac,
        ],
      );
    },
    async withdraw(withdrawn, at) {
      // Times written as ISO strings (millisecond precision, exactly what is read back and sealed).
      for (const w of withdrawn)
        await client.query(
          `UPDATE platform.rotating_keys SET withdrawn_at = $2::timestamptz, schedule_mac = $3
            WHERE kid = $1 AND withdrawn_at IS NULL`,
          [w.kid, new Date(at).toISOString(), w.scheduleMac],
        );
    },
    async adopt(kid, scheduleMac) {
      await client.query(
        `UPDATE platform.rotating_keys SET schedule_mac = $2 WHERE kid = $1 AND schedule_mac IS NULL`,
        [kid, scheduleMac],
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
