// lib/coalesce: the calls of one event-loop turn reach `run` together, in call order, and each caller gets its
// own item's outcome; calls of a later turn make a new batch.
import { describe, expect, it } from 'vitest';
import { coalesce } from '../../lib/coalesce.ts';

describe('coalesce', () => {
  it('runs the calls of one turn as one batch, in order, each with its own result', async () => {
    const batches: number[][] = [];
    const double = coalesce<number, number>((items) => {
      batches.push([...items]);
      return items.map(async (n) => n * 2);
    });
    expect(await Promise.all([double(1), double(2), double(3)])).toEqual([2, 4, 6]);
    expect(await double(4)).toBe(8);
    expect(batches).toEqual([[1, 2, 3], [4]]);
  });

  it('gathers calls made in other callbacks of the same turn', async () => {
    const batches: number[][] = [];
    const id = coalesce<number, number>((items) => {
      batches.push([...items]);
      return items.map(async (n) => n);
    });
    // Two callbacks of one loop phase (as the I/O callbacks of one poll are): the first call's run is scheduled
    // for after the phase, so the second joins it.
    const a = new Promise<number>((r) => setImmediate(() => r(id(1))));
    const b = new Promise<number>((r) => setImmediate(() => r(id(2))));
    expect(await Promise.all([a, b])).toEqual([1, 2]);
    expect(batches).toEqual([[1, 2]]);
  });

  it('settles members apart: one rejection leaves the others, a throwing run rejects all', async () => {
    const f = coalesce<number, number>((items) =>
      items.map(async (n) => {
        if (n < 0) throw new Error(`negative ${n}`);
        return n;
      }),
    );
    const out = await Promise.allSettled([f(1), f(-1), f(2)]);
    expect(out.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const broken = coalesce<number, number>(() => {
      throw new Error('no');
    });
    await expect(Promise.all([broken(1), broken(2)])).rejects.toThrow('no');
    const short = coalesce<number, number>(() => []);
    await expect(short(1)).rejects.toThrow(/0 results for 1 items/);
  });

  it('splits a turn larger than maxBatch', async () => {
    const sizes: number[] = [];
    const f = coalesce<number, number>(
      (items) => {
        sizes.push(items.length);
        return items.map(async (n) => n);
      },
      { maxBatch: 4 },
    );
    await Promise.all(Array.from({ length: 10 }, (_, i) => f(i)));
    expect(sizes).toEqual([4, 4, 2]);
  });

  it('holds calls while maxInFlight batches are out, and sends them together when one settles', async () => {
    const batches: number[][] = [];
    const release: Array<() => void> = [];
    const f = coalesce<number, number>(
      (items) => {
        batches.push([...items]);
        const done = new Promise<void>((r) => release.push(r));
        return items.map(async (n) => {
          await done;
          return n;
        });
      },
      { maxInFlight: 1 },
    );
    const first = f(1);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1]]);
    // Three later turns while the first batch is out: nothing leaves.
    const later: Promise<number>[] = [];
    for (const n of [2, 3, 4]) {
      later.push(f(n));
      await new Promise((r) => setImmediate(r));
    }
    expect(batches).toEqual([[1]]);
    release[0]!();
    expect(await first).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1], [2, 3, 4]]);
    release[1]!();
    expect(await Promise.all(later)).toEqual([2, 3, 4]);
  });

  it('counts a batch settled when every member is, rejections included', async () => {
    const batches: number[][] = [];
    let failFirst: (e: Error) => void = () => {};
    const f = coalesce<number, number>(
      (items) => {
        batches.push([...items]);
        return items.map((n) =>
          n === 1 ? new Promise<number>((_, reject) => (failFirst = reject)) : Promise.resolve(n),
        );
      },
      { maxInFlight: 1 },
    );
    const one = f(1);
    const two = f(2);
    await new Promise((r) => setImmediate(r));
    const three = f(3);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1, 2]]); // 2 settled, 1 has not: the batch is still out
    failFirst(new Error('lost'));
    await expect(one).rejects.toThrow('lost');
    expect(await two).toBe(2);
    expect(await three).toBe(3);
    expect(batches).toEqual([[1, 2], [3]]);
  });
});
