import type { EventEmitter } from 'node:events';
import type { Logger } from '../logger.ts';

const FIRST_INTERVAL_MS = 1000;
const MAX_INTERVAL_MS = 60_000;

/**
 * Logs a Redis client's connection errors with back-off: the first at once, then at most one line per interval,
 * the interval doubling from 1 s to 60 s, each line saying how many it stands for (`repeated`). The client
 * retries every half second while Redis is away, and a line per retry buried everything else in the log. When
 * the connection is ready again, one line says so and the back-off starts over.
 */
export function logRedisErrors(
  redis: EventEmitter,
  log: Pick<Logger, 'warn' | 'info'>,
  now: () => number = Date.now,
): void {
  let interval = FIRST_INTERVAL_MS;
  let nextAt = 0;
  let repeated = 0;
  let failing = false;
  redis.on('error', (err: Error) => {
    failing = true;
    const t = now();
    if (t < nextAt) {
      repeated += 1;
      return;
    }
    log.warn({ err: { message: err.message }, repeated, next_report_ms: interval }, 'redis error');
    repeated = 0;
    nextAt = t + interval;
    interval = Math.min(interval * 2, MAX_INTERVAL_MS);
  });
  redis.on('ready', () => {
    if (failing) log.info({ repeated }, 'redis connection restored');
    failing = false;
    interval = FIRST_INTERVAL_MS;
    nextAt = 0;
    repeated = 0;
  });
}
