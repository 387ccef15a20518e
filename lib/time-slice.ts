// CPU-heavy synchronous work run in slices of the event loop. A task queued here runs in a later turn, in queue
// order, with as many others as fit in `budgetMs`; then the loop is let go for a turn (new requests read, replies
// taken, statements sent) before the next slice. Without it, the grants whose statement came back together sign
// all their tokens in one go: on a busy provider that is every grant at once, and the requests that arrive
// meanwhile wait to be read until the last signature, then go to Redis and Postgres together while the core idles
// (docs/performance.md). A slice ends after the task that crosses the budget, so it lasts budget + one task.

export type TimeSliced = <T>(task: () => T) => Promise<T>;

export function timeSliced(budgetMs: number, now: () => number = () => performance.now()): TimeSliced {
  const queue: Array<{ task: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void }> =
    [];
  let scheduled = false;

  const slice = () => {
    const start = now();
    do {
      const next = queue.shift()!;
      try {
        next.resolve(next.task());
      } catch (err) {
        next.reject(err);
      }
    } while (queue.length > 0 && now() - start < budgetMs);
    // Queued from the check phase, the next slice runs in the next turn, after its I/O.
    if (queue.length > 0) setImmediate(slice);
    else scheduled = false;
  };

  return <T>(task: () => T) =>
    new Promise<T>((resolve, reject) => {
      queue.push({ task, resolve: resolve as (v: unknown) => void, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(slice);
      }
    });
}
