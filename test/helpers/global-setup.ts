// Finds Postgres and Redis for the suite, in the documented order: TEST_DATABASE_URL / TEST_REDIS_URL,
// else the local default ports, else throwaway containers when a Docker engine answers, else one clear line.
import net from 'node:net';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
  }
}

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function redisAnswers(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port || 6379) });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(2000, () => done(false));
    s.once('error', () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

const stops: Array<() => Promise<unknown>> = [];

export async function setup(project: TestProject): Promise<void> {
  let databaseUrl = process.env.TEST_DATABASE_URL;
  let redisUrl = process.env.TEST_REDIS_URL;
  if (!databaseUrl && (await postgresAnswers('postgresql://postgres@127.0.0.1:5432/postgres'))) {
    databaseUrl = 'postgresql://postgres@127.0.0.1:5432/postgres';
  }
  if (!redisUrl && (await redisAnswers('redis://127.0.0.1:6379'))) redisUrl = 'redis://127.0.0.1:6379';

  if (!databaseUrl || !redisUrl) {
    const tc = await import('testcontainers').catch(() => undefined);
    let dockerOk = false;
    if (tc) {
      try {
        await tc.getContainerRuntimeClient();
        dockerOk = true;
      } catch {
        dockerOk = false;
      }
    }
    if (!tc || !dockerOk) {
      throw new Error(
        `No ${!databaseUrl ? 'PostgreSQL' : 'Redis'} for the tests: set TEST_DATABASE_URL and TEST_REDIS_URL, ` +
          'or run PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379, or start a Docker engine.',
      );
    }
    if (!databaseUrl) {
      const c = await new tc.GenericContainer('postgres:16-alpine')
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
        .withExposedPorts(5432)
        .withWaitStrategy(tc.Wait.forLogMessage(/database system is ready to accept connections/, 2))
        .start();
      stops.push(() => c.stop());
      databaseUrl = `postgresql://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
    }
    if (!redisUrl) {
      const c = await new tc.GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
      stops.push(() => c.stop());
      redisUrl = `redis://${c.getHost()}:${c.getMappedPort(6379)}`;
    }
  }
  project.provide('databaseUrl', databaseUrl);
  project.provide('redisUrl', redisUrl);
}

export async function teardown(): Promise<void> {
  await Promise.all(stops.map((s) => s()));
}
