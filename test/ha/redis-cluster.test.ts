// Redis Cluster failover with real processes: three masters and three replicas (`redis-cli --cluster create`,
// password-protected) of the test's own; a real IdP (REDIS_URL=redis+cluster://…) revoking every 50 ms, two real
// gateways (REDIS_CLUSTER_NODES + REDIS_PASSWORD), whose subscriptions sit on the master that is killed, and one
// started after the failover. That master is SIGKILLed just after acknowledging a revocation its frozen replica
// never received: every acknowledged revocation must still be refused by every gateway within 5 s of the
// promotion (the gateways' resync scans every master), and the IdP's rate limits must keep counting in Redis.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onNode, type RedisCluster, type RedisNode, startRedisCluster } from '../helpers/redis-ha.ts';
import {
  type HaStack,
  rateLimitsAfterFailover,
  revocationsAcrossFailover,
  startHaStack,
} from '../helpers/revocation-failover.ts';

let cluster: RedisCluster;
let stack: HaStack;
let client: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster();
  stack = await startHaStack({
    idpRedisUrl: `redis+cluster://:${cluster.password}@${cluster.nodeList}`,
    gatewayRedisEnv: { REDIS_CLUSTER_NODES: cluster.nodeList, REDIS_PASSWORD: cluster.password },
  });
  client = new Cluster(
    cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { redisOptions: { password: cluster.password }, slotsRefreshInterval: 500 },
  );
  client.on('error', () => {});
}, 120_000);

afterAll(async () => {
  client?.disconnect();
  await stack?.stop();
  await cluster?.stop();
});

describe('Redis Cluster failover', () => {
  it('no acknowledged revocation is lost; every gateway enforces all of them within 5 s; rate limits still count', async () => {
    const topology = await cluster.topology();
    // The first node listed is a master: the gateways' subscriptions are on it.
    const doomed = cluster.nodes[0]!;
    expect(topology.get(doomed.port)?.role).toBe('master');
    const subscribers = await onNode(
      doomed.port,
      cluster.password,
      (r) => r.client('LIST') as Promise<string>,
    );
    expect(subscribers.match(/name=gateway-revocations/g)?.length).toBe(2);
    const replica: RedisNode = cluster.nodes.find((n) => topology.get(n.port)?.masterPort === doomed.port)!;
    const exists = async (key: string) => (await client.exists(key)) === 1;
    const report = await revocationsAcrossFailover(stack, {
      jtiOnDoomedMaster: async () => {
        for (;;) {
          const jti = crypto.randomUUID();
          const owner = await onNode(doomed.port, cluster.password, async (r) => {
            const slot = Number(await r.call('CLUSTER', 'KEYSLOT', `platform:deny:jti:${jti}`));
            const ranges = (await r.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
            return ranges.find(([a, b]) => slot >= a && slot <= b)?.[2][1];
          });
          if (owner === doomed.port) return jti;
        }
      },
      freezeReplica: async () => {
        replica.pause();
        await onNode(doomed.port, cluster.password, (r) => r.call('CLIENT', 'KILL', 'TYPE', 'replica'));
      },
      killMaster: async () => {
        await doomed.kill();
        replica.resume();
      },
      failedOver: async () => {
        const deadline = Date.now() + 30_000;
        for (;;) {
          const t = await cluster.topology().catch(() => undefined);
          if (t?.get(replica.port)?.role === 'master') {
            const info = await onNode(
              replica.port,
              cluster.password,
              (r) => r.call('CLUSTER', 'INFO') as Promise<string>,
            );
            if (info.includes('cluster_state:ok')) return;
          }
          if (Date.now() > deadline) throw new Error('the Cluster did not promote the replica');
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      exists,
    });
    console.log(`cluster failover: ${JSON.stringify(report)}`);
    expect(report.acknowledged).toBeGreaterThan(10);
    await rateLimitsAfterFailover(stack, { exists });
  });
});
