// Calls made during one turn of the event loop, run as one: the first call schedules the run (setImmediate,
// after the I/O callbacks of the turn), every call until then joins it. `run` gets the items in call order and
// returns one promise per item, so each caller gets its own item's outcome (a batch may settle its members
// differently). Under load a turn carries many requests, and one round trip for all of them saves the others'
// writes, reads and the server's per-statement work; alone, a call waits only for the end of its turn.

export type RunBatch<T, R> = (items: readonly T[]) => readonly Promise<R>[];

export function coalesce<T, R>(run: RunBatch<T, R>, maxBatch = 64): (item: T) => Promise<R> {
  let pending: Array<{ item: T; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];

  const start = (part: typeof pending) => {
    let results: readonly Promise<R>[];
    try {
      results = run(part.map((p) => p.item));
      if (results.length !== part.length)
        throw new Error(`coalesce: ${results.length} results for ${part.length} items`);
    } catch (err) {
      for (const p of part) p.reject(err);
      return;
    }
    part.forEach((p, j) => {
      results[j]!.then(p.resolve, p.reject);
    });
  };

  const flush = () => {
    const batch = pending;
    pending = [];
    for (let i = 0; i < batch.length; i += maxBatch) start(batch.slice(i, i + maxBatch));
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ item, resolve, reject });
    });
}
