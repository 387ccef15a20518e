import type { Pool } from '../../lib/db.ts';

// Blocked users (docs/idp.md § Blocking a user). Blocking and unblocking go through the revocation service (a
// block is revoke-user and this row in one transaction); this store only reads.

export interface Block {
  email: string;
  blockedBy: string;
  blockedAt: Date;
}

export interface BlockStore {
  find(email: string): Promise<Block | undefined>;
  isBlocked(email: string): Promise<boolean>;
  /** Newest first. */
  list(): Promise<Block[]>;
}

interface Row {
  email: string;
  blocked_by: string;
  blocked_at: Date;
}

const toBlock = (r: Row): Block => ({ email: r.email, blockedBy: r.blocked_by, blockedAt: r.blocked_at });

export function createBlockStore(pool: Pool): BlockStore {
  const find = async (email: string) => {
    const { rows } = await pool.query<Row>({
      name: 'block_find',
      text: 'SELECT email, blocked_by, blocked_at FROM platform.user_blocks WHERE email = $1',
      values: [email.trim().toLowerCase()],
    });
    return rows[0] && toBlock(rows[0]);
  };
  return {
    find,
    isBlocked: async (email) => (await find(email)) !== undefined,
    async list() {
      const { rows } = await pool.query<Row>(
        'SELECT email, blocked_by, blocked_at FROM platform.user_blocks ORDER BY blocked_at DESC, email',
      );
      return rows.map(toBlock);
    },
  };
}
