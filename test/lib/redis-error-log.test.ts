// The IdP's Redis error lines with back-off (lib/redis/error-log.ts): while Redis is away the client retries every
// half second; the log gets the first error at once, then one line per interval (1 s doubling to 60 s) counting
// the errors it stands for, and one line when the connection is back. Driven by a clock of the test's own.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { logRedisErrors } from '../../lib/redis/error-log.ts';

function harness() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const log = {
    warn: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', obj, msg }),
    info: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'info', obj, msg }),
  };
  let t = 1_000_000;
  const redis = new EventEmitter();
  logRedisErrors(redis, log as never, () => t);
  /** One retry's error every 500 ms for `seconds`. */
  const outage = (seconds: number) => {
    for (let i = 0; i < seconds * 2; i++) {
      redis.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      t += 500;
    }
  };
  return { lines, redis, outage };
}

describe('logRedisErrors', () => {
  it('logs a two-minute outage (240 errors) in a handful of lines, each counting what it stands for', () => {
    const h = harness();
    h.outage(120);
    const warns = h.lines.filter((l) => l.level === 'warn');
    // 0, 1, 3, 7, 15, 31, 63 s and 123 s would be the report times; within 120 s: 7 lines.
    expect(warns).toHaveLength(7);
    expect(warns.map((w) => w.obj.next_report_ms)).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000]);
    const counted = warns.reduce((n, w) => n + 1 + Number(w.obj.repeated), 0);
    expect(counted).toBeLessThanOrEqual(240);
    expect(warns[0]!.obj.repeated).toBe(0);
    expect(warns[1]!.obj.repeated).toBe(1);
    expect(warns[0]!.msg).toBe('redis error');
    expect(warns[0]!.obj.err).toEqual({ message: 'connect ECONNREFUSED 127.0.0.1:6379' });
  });

  it('says when the connection is back, and starts the back-off over for the next outage', () => {
    const h = harness();
    h.outage(10);
    h.redis.emit('ready');
    expect(h.lines.at(-1)).toMatchObject({ level: 'info', msg: 'redis connection restored' });
    const before = h.lines.length;
    h.outage(2);
    expect(h.lines.slice(before).map((l) => l.obj.next_report_ms)).toEqual([1000, 2000]);
    // A ready without an outage before it (the first connection) logs nothing.
    const quiet = harness();
    quiet.redis.emit('ready');
    expect(quiet.lines).toEqual([]);
  });
});
