// createRedisClient's autoPipelining: the commands of one turn leave as one pipeline (the IdP's rate-limit
// checks under load); without it, each is written on its own. Against this machine's Redis.
import { afterEach, describe, expect, it } from 'vitest';
import { createRedisClient, type RedisClient } from '../../lib/redis/client.ts';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const clients: RedisClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
});

describe('createRedisClient autoPipelining', () => {
  it('queues the commands of one turn into one pipeline, with the same replies', async () => {
    const on = createRedisClient(url, { connectionName: 'test-autopipe', autoPipelining: true });
    const off = createRedisClient(url, { connectionName: 'test-plain' });
    clients.push(on, off);
    await Promise.all([on.ping(), off.ping()]);
    const key = `test:autopipe:${Date.now()}:${Math.random()}`;
    const replies = Array.from({ length: 10 }, () => on.incr(key));
    // Queued for the pipeline the turn ends with, not written yet.
    expect(on.autoPipelineQueueSize).toBe(10);
    expect(await Promise.all(replies)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const plain = Array.from({ length: 3 }, () => off.incr(key));
    expect(off.autoPipelineQueueSize).toBe(0);
    expect(await Promise.all(plain)).toEqual([11, 12, 13]);
    await on.del(key);
  });
});
