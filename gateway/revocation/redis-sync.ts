import type { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger.ts';
import { isCluster, masters, onFailover, type RedisClient } from '../../lib/redis/client.ts';
import {
  type ConnectionDropped,
  parseConnectionDropped,
  parseRevocationEvent,
  REVOCATION_CHANNEL,
  type RevocationEvent,
} from '../../lib/revocation.ts';
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
 * `{"email","cutoff"}`; and `{"connection","email"}`, a disconnect, handed to `onConnectionDropped`), then copy every denylist key (jti, sub and email)
 * (SCAN), on start and after every reconnection — events published while disconnected are lost by pub/sub,
 * so the copy is what makes the mirror whole again. The subscription is confirmed before the scan starts, so
 * nothing published in between can fall through the gap. A resync is retried until it succeeds; until then the
 * mirror is not current (GATEWAY_REVOCATION_MODE decides, and /health says `resyncing`).
 *
 * High availability (docs/operations.md § Redis failover): with Sentinel the subscription follows the master,
 * so a failover is a reconnection like any other. On a Cluster the copy scans every master (a Cluster client
 * has no scanStream and SCAN reaches one node), and a change of the Cluster's masters resyncs too.
 */
export function startRevocationSync(
  mirror: RevocationMirror,
  redis: { cmd: RedisClient; sub: Redis },
  log: Logger,
  onEvent?: (event: RevocationEvent) => void,
  onConnectionDropped?: (event: ConnectionDropped) => void,
): RevocationSync {
  const { cmd, sub } = redis;
  let stopped = false;
  let generation = 0;
  const waiters = new Set<() => void>();

  sub.on('message', (channel: string, message: string) => {
    if (channel !== REVOCATION_CHANNEL) return;
    const event = parseRevocationEvent(message);
    const dropped = event ? undefined : parseConnectionDropped(message);
    if (dropped) {
      onConnectionDropped?.(dropped);
      return;
    }
    if (!event) {
      log.warn({ channel }, 'ignored a malformed revocation event');
      return;
    }
    mirror.apply(event);
    onEvent?.(event);
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
    for (const node of masters(cmd)) await copyFrom(node);
  }

  async function copyFrom(node: Redis): Promise<void> {
    const stream = node.scanStream({ match: 'platform:deny:*', count: 1000 });
    for await (const batch of stream as AsyncIterable<string[]>) {
      if (batch.length === 0) continue;
      // On the node itself: every key it returned is served by it (a Cluster pipeline must stay in one slot).
      const p = node.pipeline();
      for (const key of batch) {
        if (key.startsWith(JTI_PREFIX)) p.pttl(key);
        else p.get(key);
      }
      const results = (await p.exec()) ?? [];
      const now = Date.now() / 1000;
      batch.forEach((key, i) => {
        const [err, value] = results[i] ?? [new Error('no reply'), null];
        // A key of another type is not an entry anybody revoked with; any other error (no permission, a
        // node loading or moving slots, no reply) leaves an entry unread: the copy is not whole, so the
        // mirror must not be declared current — the resync fails and is retried.
        if (err) {
          if (err.message.startsWith('WRONGTYPE')) return;
          throw new Error(`${key}: ${err.message}`);
        }
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
    let failures = 0;
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
        // Once per streak at warn (an operator sees a resync that cannot finish), then at debug.
        const level = failures++ === 0 ? 'warn' : 'debug';
        log[level]({ err: { message: (err as Error).message } }, 'revocation resync failed; retrying');
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
    if (mirror.current) log.warn('revocation mirror resyncing: the subscription to redis was lost');
    mirror.setCurrent(false);
  });
  // A Cluster promoted a replica: what the lost master acknowledged may be gone from the keys; the IdPs write
  // it again (idp/revocation.ts keepDenylistRestored) and the copy is taken again here.
  const stopWatching = isCluster(cmd)
    ? onFailover(cmd, () => {
        if (!mirror.current) return;
        generation += 1;
        void resync(generation);
      })
    : () => {};

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
      stopWatching();
      clearInterval(sweep);
    },
  };
}
