// lib/time-slice: queued tasks run in order in later turns, as many as fit the budget in one turn, with a turn of
// the loop (I/O, immediates) between slices; a task's throw rejects that task only.
import { describe, expect, it } from 'vitest';
import { timeSliced } from '../../lib/time-slice.ts';

describe('timeSliced', () => {
  it('runs tasks in order, each caller getting its own result or error', async () => {
    const run = timeSliced(1000);
    const out = await Promise.allSettled([
      run(() => 1),
      run(() => {
        throw new Error('bad task');
      }),
      run(() => 3),
    ]);
    expect(out).toEqual([
      { status: 'fulfilled', value: 1 },
      { status: 'rejected', reason: new Error('bad task') },
      { status: 'fulfilled', value: 3 },
    ]);
  });

  it('does not run a task in the caller’s turn', async () => {
    const run = timeSliced(1000);
    let ran = false;
    const p = run(() => {
      ran = true;
    });
    await Promise.resolve();
    expect(ran).toBe(false);
    await p;
    expect(ran).toBe(true);
  });

  it('lets the loop turn between slices once a slice has used its budget', async () => {
    // A clock the tasks move: each task "takes" 2 ms, the budget is 4 ms, so a slice runs two tasks.
    let clock = 0;
    const run = timeSliced(4, () => clock);
    const order: string[] = [];
    const tasks = Array.from({ length: 5 }, (_, i) =>
      run(() => {
        clock += 2;
        order.push(`task ${i}`);
      }),
    );
    // Queued after the first slice was scheduled: runs in that turn's check phase, after the first slice. A
    // slice that did not yield would run all five tasks before it.
    setImmediate(() => order.push('other work'));
    await Promise.all(tasks);
    expect(order).toEqual(['task 0', 'task 1', 'other work', 'task 2', 'task 3', 'task 4']);
  });

  it('runs one task per slice when a task alone crosses the budget', async () => {
    let clock = 0;
    const run = timeSliced(1, () => clock);
    const turns: number[] = [];
    let turn = 0;
    const tick = () => {
      turn++;
      if (turn < 10) setImmediate(tick);
    };
    setImmediate(tick);
    await Promise.all(
      [0, 1, 2].map(() =>
        run(() => {
          clock += 5;
          turns.push(turn);
        }),
      ),
    );
    expect(new Set(turns).size).toBe(3);
  });
});
