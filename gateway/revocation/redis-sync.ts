import type { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger.ts';
import { parseRevocationEvent, REVOCATION_CHANNEL } from '../../lib/revocation.ts';
import type { RevocationMirror } from './mirror.ts';

const JTI_PREFIX = 'platform:deny:jti:';
const SUB_PREFIX = 'platform:deny:sub:';
const EMAIL_PREFIX = 'platform:deny:email:';
const RESYNC_RETRY_MS = 250;
const SWEEP_INTERVAL_MS = 60_000;

export interface RevocationSync {
  /** Resolves once the mirror is current, or after `timeoutMs` (start-up does not wait for Redis forever). */
  ready(timeoutMs: number): Promise<boolean>;
  stop(): void;
}

/**
 * Keeps a RevocationMirror equal to Redis: subscribe to `platform:revocations` (`{"jti"}`, `{"sub","cutoff"}`,
 * `{"email","cutoff"}`), then copy every denylist key (jti, sub and email)
 * (SCAN), on start and after every reconnection — events published while disconnected are lost by pub/sub,
 * so the copy is what makes the mirror whole again. The subscription is confirmed before the scan starts, so
 * nothing published in between can fall through the gap.
 */
export function startRevocationSync(
  mirror: RevocationMirror,
  redis: { cmd: Redis; sub: Redis },
  log: Logger,
): RevocationSync {
  const { cmd, sub } = redis;
  let stopped = false;
  let generation = 0;
  const waiters = new Set<() => void>();

  sub.on('message', (channel: string, message: string) => {
    if (channel !== REVOCATION_CHANNEL) return;
    const event = parseRevocationEvent(message);
    if (!event) {
      log.warn({ channel }, 'ignored a malformed revocation event');
      return;
    }
    mirror.apply(event);
    if ('jti' in event) refineJtiRetention(event.jti);
  });

  // The event has no exp; the denylist key's TTL is exactly "until the token expires".
  function refineJtiRetention(jti: string): void {
    cmd.pttl(`${JTI_PREFIX}${jti}`).then(
      (ms) => {
        if (ms > 0) mirror.denyJti(jti, Date.now() / 1000 + ms / 1000);
      },
      () => {},
    );
  }

  async function copyDenylist(): Promise<void> {
    const stream = cmd.scanStream({ match: 'platform:deny:*', count: 1000 });
    for await (const batch of stream as AsyncIterable<string[]>) {
      if (batch.length === 0) continue;
      const p = cmd.pipeline();
      for (const key of batch) {
        if (key.startsWith(JTI_PREFIX)) p.pttl(key);
        else p.get(key);
      }
      const results = (await p.exec()) ?? [];
      const now = Date.now() / 1000;
      batch.forEach((key, i) => {
        const [err, value] = results[i] ?? [new Error('no reply'), null];
        if (err) return;
        if (key.startsWith(JTI_PREFIX)) {
          const ms = Number(value);
          // -1: no TTL set (a hand-written key) — keep it the default retention.
          if (ms !== -2) mirror.denyJti(key.slice(JTI_PREFIX.length), now + (ms > 0 ? ms / 1000 : 24 * 3600));
        } else if (key.startsWith(SUB_PREFIX)) {
          const cutoff = Number(value);
          if (Number.isFinite(cutoff)) mirror.denySubject(key.slice(SUB_PREFIX.length), cutoff);
        } else if (key.startsWith(EMAIL_PREFIX)) {
          const cutoff = Number(value);
          if (Number.isFinite(cutoff)) mirror.denyEmail(key.slice(EMAIL_PREFIX.length), cutoff);
        }
      });
    }
  }

  async function resync(gen: number): Promise<void> {
    while (!stopped && gen === generation) {
      try {
        await sub.subscribe(REVOCATION_CHANNEL);
        await copyDenylist();
        if (gen !== generation) return;
        mirror.setCurrent(true);
        log.info('revocation mirror in sync with redis');
        for (const w of waiters) w();
        waiters.clear();
        return;
      } catch (err) {
        log.debug({ err: { message: (err as Error).message } }, 'revocation resync failed; retrying');
        await new Promise((r) => setTimeout(r, RESYNC_RETRY_MS));
      }
    }
  }

  sub.on('ready', () => {
    generation += 1;
    void resync(generation);
  });
  sub.on('close', () => {
    generation += 1;
    mirror.setCurrent(false);
  });

  const sweep = setInterval(() => mirror.sweep(), SWEEP_INTERVAL_MS);
  sweep.unref();

  sub.connect().catch(() => {
    // ioredis keeps retrying; the outage tracker has logged it.
  });
  cmd.connect().catch(() => {});

  return {
    ready(timeoutMs) {
      if (mirror.current) return Promise.resolve(true);
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          waiters.delete(done);
          resolve(false);
        }, timeoutMs);
        waiters.add(done);
      });
    },
    stop() {
      stopped = true;
      clearInterval(sweep);
    },
  };
}
