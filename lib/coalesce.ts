// Calls made during one turn of the event loop, run as one: the first call schedules the run (setImmediate,
// after the I/O callbacks of the turn), every call until then joins it. `run` gets the items in call order and
// returns one promise per item, so each caller gets its own item's outcome (a batch may settle its members
// differently). Under load a turn carries many requests, and one round trip for all of them saves the others'
// writes, reads and the server's per-statement work; alone, a call waits only for the end of its turn.
//
// `maxInFlight` bounds the batches started and not yet settled: calls made while the bound is reached wait and
// leave together when a batch settles (group commit). Under load the batches then grow with the load instead of
// leaving one per turn; alone, a call still leaves at the end of its turn.

export type RunBatch<T, R> = (items: readonly T[]) => readonly Promise<R>[];

export interface CoalesceOptions {
  /** The most items a batch carries; a larger turn is split. Default 64. */
  maxBatch?: number;
  /** The most batches in flight (started, not all settled). Default: no bound. */
  maxInFlight?: number;
}

export function coalesce<T, R>(
  run: RunBatch<T, R>,
  { maxBatch = 64, maxInFlight = Number.POSITIVE_INFINITY }: CoalesceOptions = {},
): (item: T) => Promise<R> {
  let pending: Array<{ item: T; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  let inFlight = 0;
  let scheduled = false;

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
    inFlight++;
    let left = part.length;
    const settled = () => {
      if (--left > 0) return;
      inFlight--;
      schedule();
    };
    part.forEach((p, j) => {
      results[j]!.then(
        (r) => {
          settled();
          p.resolve(r);
        },
        (e: unknown) => {
          settled();
          p.reject(e);
        },
      );
    });
  };

  const flush = () => {
    scheduled = false;
    while (pending.length > 0 && inFlight < maxInFlight) {
      const part = pending.slice(0, maxBatch);
      pending = pending.slice(maxBatch);
      start(part);
    }
  };

  // The waiting calls leave at the end of the turn, if a batch may start then.
  const schedule = () => {
    if (scheduled || pending.length === 0 || inFlight >= maxInFlight) return;
    scheduled = true;
    setImmediate(flush);
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      pending.push({ item, resolve, reject });
      schedule();
    });
}
