// The Redis connection settings (lib/redis/config.ts): the three URL shapes and the variables form parse to the
// connection ioredis is given; every bad value is one line naming the variable, never echoing a password.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../lib/config.ts';
import { formatRedisUrl, parseRedisUrl, redactRedisUrl, redisUrl } from '../../lib/redis/config.ts';

const oneLine = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).not.toContain('\n');
    return message;
  }
  throw new Error('no error');
};

describe('REDIS_URL shapes', () => {
  it('a plain URL stays as it is', () => {
    expect(parseRedisUrl('rediss://gw:pw@redis.internal:6380/2')).toEqual({
      kind: 'standalone',
      url: 'rediss://gw:pw@redis.internal:6380/2',
    });
  });

  it('redis+sentinel:// names the Sentinels, the master, the database and both credentials', () => {
    const c = parseRedisUrl(
      'redis+sentinel://gateway:p%40ss@s1:26379,s2,[::1]:26380/mymaster/3?sentinel_username=sen&sentinel_password=s%26p',
    );
    expect(c).toEqual({
      kind: 'sentinel',
      tls: false,
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'mymaster',
      db: 3,
      username: 'gateway',
      password: 'p@ss',
      sentinelUsername: 'sen',
      sentinelPassword: 's&p',
    });
    expect(parseRedisUrl(formatRedisUrl(c))).toEqual(c);
  });

  it('redis+cluster:// names seed nodes (default port 6379); rediss+ speaks TLS', () => {
    const c = parseRedisUrl('rediss+cluster://:pw@n1:7000,n2');
    expect(c).toEqual({
      kind: 'cluster',
      tls: true,
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 6379 },
      ],
      username: undefined,
      password: 'pw',
    });
    expect(parseRedisUrl(formatRedisUrl(c))).toEqual(c);
  });

  it.each([
    ['http://redis:6379', /^REDIS_URL: must begin with redis:\/\/, rediss:\/\//],
    ['redis+sentinel://s1:26379', /^REDIS_URL: names no master/],
    ['redis+sentinel://s1:26379/', /^REDIS_URL: names no master/],
    ['redis+sentinel:///mymaster', /^REDIS_URL: names no host/],
    ['redis+sentinel://s1:abc/mymaster', /^REDIS_URL: "s1:abc" is not host:port$/],
    ['redis+sentinel://s1:70000/mymaster', /^REDIS_URL: "s1:70000": the port must be between 1 and 65535$/],
    ['redis+sentinel://s1,,s2/mymaster', /^REDIS_URL: must be a comma-separated list of host:port/],
    ['redis+sentinel://s1/mymaster/x', /^REDIS_URL: the database must be a number, got "x"$/],
    ['redis+sentinel://s1/mymaster/1/2', /^REDIS_URL: has more than \/<master name>\/<database>$/],
    ['redis+sentinel://s1/mymaster?sentinelPassword=x', /^REDIS_URL: unknown parameter "sentinelPassword"/],
    ['redis+cluster://n1:7000/2', /^REDIS_URL: a Redis Cluster has database 0 only$/],
    ['redis+cluster://n1:7000?name=x', /^REDIS_URL: unknown parameter "name" for a cluster$/],
    ['redis+cluster://:%zz@n1', /^REDIS_URL: the password is not valid percent-encoding$/],
    ['redis+cluster+x://n1', /^REDIS_URL: must begin with/],
  ])('%s → %s', (url, problem) => {
    expect(oneLine(() => parseRedisUrl(url))).toMatch(problem);
  });

  it('an example password is refused in every shape, without printing it', () => {
    const example = 'change-me-redis-password';
    for (const url of [
      `redis://:${example}@h:6379`,
      `redis+sentinel://:${example}@h/m`,
      `redis+sentinel://h/m?sentinel_password=${example}`,
      `redis+cluster://:${example}@h`,
    ]) {
      const message = oneLine(() => parseRedisUrl(url));
      expect(message).toMatch(/^REDIS_URL: carries a (Sentinel )?password that is an example value/);
      expect(message).not.toContain(example);
    }
  });

  it('redacts passwords for logs', () => {
    expect(redactRedisUrl('redis+sentinel://u:secret@h/m/0?sentinel_password=other')).toBe(
      'redis+sentinel://u:***@h/m/0?sentinel_password=***',
    );
  });
});

describe('the variables form', () => {
  it('REDIS_SENTINELS + REDIS_SENTINEL_MASTER + credentials = the URL form', () => {
    const url = redisUrl({
      REDIS_SENTINELS: 's1:26379, s2:26380',
      REDIS_SENTINEL_MASTER: 'platform',
      REDIS_USERNAME: 'idp',
      REDIS_PASSWORD: 'pw/1',
      REDIS_SENTINEL_PASSWORD: 'spw',
    });
    expect(parseRedisUrl(url!)).toMatchObject({
      kind: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      name: 'platform',
      username: 'idp',
      password: 'pw/1',
      sentinelPassword: 'spw',
    });
  });

  it('REDIS_SENTINEL_PASSWORD applies to the URL form too', () => {
    const url = redisUrl({ REDIS_URL: 'redis+sentinel://s1/m', REDIS_SENTINEL_PASSWORD: 'spw' });
    expect(parseRedisUrl(url!)).toMatchObject({ kind: 'sentinel', sentinelPassword: 'spw' });
  });

  it('REDIS_CLUSTER_NODES', () => {
    const url = redisUrl({ REDIS_CLUSTER_NODES: 'n1:7000,n2:7001', REDIS_PASSWORD: 'pw' });
    expect(parseRedisUrl(url!)).toMatchObject({
      kind: 'cluster',
      nodes: [{ port: 7000 }, { port: 7001 }],
      password: 'pw',
    });
  });

  it('nothing set: undefined (the process says REDIS_URL is required)', () => {
    expect(redisUrl({})).toBeUndefined();
  });

  it.each([
    [
      { REDIS_URL: 'redis://h', REDIS_SENTINELS: 's1' },
      /^REDIS_SENTINELS: set only one of REDIS_URL and REDIS_SENTINELS$/,
    ],
    [{ REDIS_SENTINELS: 's1', REDIS_CLUSTER_NODES: 'n1' }, /^REDIS_CLUSTER_NODES: set only one of/],
    [{ REDIS_SENTINELS: 's1' }, /^REDIS_SENTINEL_MASTER: is required with REDIS_SENTINELS$/],
    [
      { REDIS_URL: 'redis://h', REDIS_SENTINEL_MASTER: 'm' },
      /^REDIS_SENTINEL_MASTER: is used with REDIS_SENTINELS only$/,
    ],
    [{ REDIS_URL: 'redis://h', REDIS_PASSWORD: 'x' }, /^REDIS_PASSWORD: is not used with REDIS_URL/],
    [
      { REDIS_URL: 'redis://h', REDIS_SENTINEL_PASSWORD: 'x' },
      /^REDIS_SENTINEL_PASSWORD: is used with a Sentinel connection only$/,
    ],
    [{ REDIS_CLUSTER_NODES: 'n1:x' }, /^REDIS_CLUSTER_NODES: "n1:x" is not host:port$/],
    [{ REDIS_SENTINELS: 's1:0', REDIS_SENTINEL_MASTER: 'm' }, /^REDIS_SENTINELS: "s1:0": the port must be/],
  ])('%o → %s', (env, problem) => {
    expect(oneLine(() => redisUrl(env))).toMatch(problem);
  });
});
