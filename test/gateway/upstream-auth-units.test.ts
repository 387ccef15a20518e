// The parts of gateway/upstream-auth/ as units: the cache's margin, keys, drops and revocations, and the −32042
// answer's shape for single requests, batches and bodies that hold no JSON-RPC request. Their use by a running
// gateway is in upstream-auth.test.ts.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConnectionRequiredError } from '../../gateway/errors.ts';
import { elicitationAnswer } from '../../gateway/upstream-auth/elicitation.ts';
import {
  cacheKey,
  EXPIRY_MARGIN_SECONDS,
  UpstreamTokenCache,
} from '../../gateway/upstream-auth/token-cache.ts';
import { parseConnectionDropped, parseRevocationEvent } from '../../lib/revocation.ts';

const owner = (sub: string, actors: string[] = []) => ({
  connection: 'github',
  sub,
  email: `${sub}@example.com`,
  actors,
});
const T0 = 1_800_000_000;

describe('UpstreamTokenCache', () => {
  it('serves a token until 60 s before it expires; one living 60 s or less, or without expiry, is not kept', () => {
    const cache = new UpstreamTokenCache();
    const k = cacheKey(owner('ann'));
    cache.set(k, owner('ann'), 'tok', 3600, T0);
    expect(cache.get(k, (T0 + 3600 - EXPIRY_MARGIN_SECONDS - 1) * 1000)?.token).toBe('tok');
    // Hashed once with the entry: the line identity v4 signs for it.
    expect(cache.get(k, T0 * 1000)?.sha256).toBe(createHash('sha256').update('tok').digest('hex'));
    expect(cache.get(k, (T0 + 3600 - EXPIRY_MARGIN_SECONDS) * 1000)).toBeUndefined();
    expect(cache.size).toBe(0);
    cache.set(k, owner('ann'), 'short', 60, T0);
    cache.set(k, owner('ann'), 'none', undefined, T0);
    expect(cache.size).toBe(0);
  });

  it('keys users, connections and actor chains apart', () => {
    const keys = new Set([
      cacheKey(owner('ann')),
      cacheKey(owner('bob')),
      cacheKey({ ...owner('ann'), connection: 'jira' }),
      cacheKey(owner('ann', ['agent'])),
      cacheKey(owner('ann', ['agent', 'first'])),
    ]);
    expect(keys.size).toBe(5);
  });

  it('drops a refused token only if it is still the one held', () => {
    const cache = new UpstreamTokenCache();
    const k = cacheKey(owner('ann'));
    cache.set(k, owner('ann'), 'new', 3600, T0);
    cache.drop(k, 'old');
    expect(cache.get(k, T0 * 1000)?.token).toBe('new');
    cache.drop(k, 'new');
    expect(cache.get(k, T0 * 1000)).toBeUndefined();
  });

  it('a subject, email or actor cut-off drops the entries obtained at or before it; a jti event drops none', () => {
    const cache = new UpstreamTokenCache();
    const entries = {
      ann: owner('ann'),
      annLater: { ...owner('ann'), connection: 'jira' },
      bob: owner('bob'),
      agentForCid: owner('cid', ['agent']),
    };
    for (const [name, o] of Object.entries(entries)) {
      cache.set(cacheKey(o), o, name, 3600, name === 'annLater' ? T0 + 10 : T0);
    }
    const held = () => Object.values(entries).map((o) => cache.get(cacheKey(o), T0 * 1000)?.token ?? '-');
    cache.revoked({ jti: 'x' });
    expect(held()).toEqual(['ann', 'annLater', 'bob', 'agentForCid']);
    cache.revoked({ sub: 'ann', cutoff: T0 });
    expect(held()).toEqual(['-', 'annLater', 'bob', 'agentForCid']);
    cache.revoked({ email: 'bob@example.com', cutoff: T0 + 5 });
    expect(held()).toEqual(['-', 'annLater', '-', 'agentForCid']);
    cache.revoked({ sub: 'agent', cutoff: T0 });
    expect(held()).toEqual(['-', 'annLater', '-', '-']);
  });

  it('a disconnect drops the user’s entries of that connection, any actor chain, and nothing else', () => {
    const cache = new UpstreamTokenCache();
    const entries = {
      ann: owner('ann'),
      annAgent: owner('ann', ['agent']),
      annJira: { ...owner('ann'), connection: 'jira' },
      bob: owner('bob'),
    };
    for (const [name, o] of Object.entries(entries)) cache.set(cacheKey(o), o, name, 3600, T0);
    const held = () => Object.values(entries).map((o) => cache.get(cacheKey(o), T0 * 1000)?.token ?? '-');
    cache.disconnected({ connection: 'github', email: 'ann@example.com' }, T0 + 5);
    expect(held()).toEqual(['-', '-', 'annJira', 'bob']);
    // An exchange that started before the disconnect answers after it: its token is not kept; a later one is.
    cache.set(cacheKey(entries.ann), entries.ann, 'in-flight', 3600, T0 + 5);
    expect(cache.get(cacheKey(entries.ann), T0 * 1000)).toBeUndefined();
    cache.set(cacheKey(entries.ann), entries.ann, 'reconnected', 3600, T0 + 6);
    expect(cache.get(cacheKey(entries.ann), T0 * 1000)?.token).toBe('reconnected');
  });

  it('a disconnect message is told apart from the revocation events (no gateway takes it for an email cut-off)', () => {
    const message = JSON.stringify({ connection: 'github', email: 'Ann@Example.com' });
    expect(parseRevocationEvent(message)).toBeUndefined();
    expect(parseConnectionDropped(message)).toEqual({ connection: 'github', email: 'ann@example.com' });
    for (const other of [
      { email: 'ann@example.com', cutoff: T0 },
      { sub: 'ann', cutoff: T0 },
      { jti: 'x' },
      { connection: 'github', email: 'ann@example.com', cutoff: T0 },
      { connection: '', email: 'ann@example.com' },
    ])
      expect(parseConnectionDropped(JSON.stringify(other))).toBeUndefined();
  });
});

describe('the −32042 answer', () => {
  const err = new ConnectionRequiredError('github', 'https://idp.example/connections/github', 'github');
  const answer = (body: unknown) =>
    elicitationAnswer(err, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)));

  it('answers a request with its id and one URL elicitation', () => {
    const a = JSON.parse(answer({ jsonrpc: '2.0', id: 'x', method: 'tools/call', params: {} })!);
    expect(a).toMatchObject({
      jsonrpc: '2.0',
      id: 'x',
      error: {
        code: -32042,
        message: err.message,
        data: { elicitations: [{ mode: 'url', url: 'https://idp.example/connections/github' }] },
      },
    });
    expect(a.error.data.elicitations[0].elicitationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.error.data.elicitations[0].message).toContain('github');
  });

  it('answers each request of a batch, none of its notifications', () => {
    const a = JSON.parse(
      answer([
        { jsonrpc: '2.0', id: 1, method: 'initialize' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      ])!,
    );
    expect(a.map((m: { id: number }) => m.id)).toEqual([1, 2]);
  });

  it('has nothing to answer for a notification, a response, a non-JSON-RPC or an unparsable body', () => {
    for (const body of [
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 1, result: {} },
      { id: 1, method: 'tools/list' },
      'not json',
      '',
    ]) {
      expect(answer(body)).toBeUndefined();
    }
    expect(elicitationAnswer(err, null)).toBeUndefined();
  });
});
