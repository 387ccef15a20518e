// Red team: "a denylist entry the gateway could not read is skipped, and the gateway says it is in sync" — the
// resync after a (re)connection copies every `platform:deny:*` key; when one of them cannot be read (no
// permission, a node loading or moving slots), the copy is not whole and the mirror must stay "not current"
// (fail-closed refuses, /health says resyncing) until a resync reads everything, never accept the token the
// unread entry revokes. Real redis-server of the test's own, where the gateway's ACL user may scan every key but
// may not read the subject cut-offs until the test grants it.
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RevocationMirror } from '../../gateway/revocation/mirror.ts';
import { type RevocationSync, startRevocationSync } from '../../gateway/revocation/redis-sync.ts';
import { createLogger } from '../../lib/logger.ts';
import { startThrowawayRedis, type ThrowawayRedis } from '../helpers/throwaway-redis.ts';

const log = createLogger({ name: 'test', level: 'silent' });
const SUBJECT = 'user-resync-1';
const CUTOFF = 1_900_000_000;

let server: ThrowawayRedis;
let sync: RevocationSync | undefined;
const clients: Redis[] = [];

beforeEach(async () => {
  server = await startThrowawayRedis({
    users: ['gw on >gw-pw ~platform:deny:jti:* ~platform:deny:email:* &platform:* +@all'],
  });
  await server.run(async (r) => {
    await r.set(`platform:deny:sub:${SUBJECT}`, String(CUTOFF));
    await r.set('platform:deny:jti:0b2c5e1a-0000-4000-8000-000000000001', '1', 'EX', 600);
  });
});

afterEach(async () => {
  sync?.stop();
  sync = undefined;
  for (const c of clients.splice(0)) c.disconnect();
  await server.stop();
});

function connect(): Redis {
  const c = new Redis({
    port: server.port,
    host: '127.0.0.1',
    username: 'gw',
    password: 'gw-pw',
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  c.on('error', () => {});
  clients.push(c);
  return c;
}

const token = { jti: '', sub: SUBJECT, oid: '', email: 'resync@example.com', iat: CUTOFF - 60 };

describe('the revocation resync', () => {
  it('stays not current while an entry cannot be read, and completes once it can', async () => {
    const mirror = new RevocationMirror('fail-closed');
    sync = startRevocationSync(mirror, { cmd: connect(), sub: connect() }, log);

    // Every key is listed by SCAN, but GET of the subject cut-off answers NOPERM: not in sync.
    expect(await sync.ready(1500)).toBe(false);
    expect(mirror.current).toBe(false);
    expect(mirror.check(token)).toBe('unknown');

    await server.run((r) => r.call('ACL', 'SETUSER', 'gw', '~platform:deny:sub:*'));
    expect(await sync.ready(5000)).toBe(true);
    expect(mirror.check(token)).toBe('revoked');
    expect(mirror.check({ ...token, iat: CUTOFF + 1 })).toBe('ok');
  });

  it('skips a key of another type (not an entry anyone revoked with) and is current', async () => {
    await server.run(async (r) => {
      await r.call('ACL', 'SETUSER', 'gw', '~platform:deny:sub:*');
      await r.rpush('platform:deny:email:not-a-string', 'x');
    });
    const mirror = new RevocationMirror('fail-closed');
    sync = startRevocationSync(mirror, { cmd: connect(), sub: connect() }, log);
    expect(await sync.ready(5000)).toBe(true);
    expect(mirror.check(token)).toBe('revoked');
  });
});
