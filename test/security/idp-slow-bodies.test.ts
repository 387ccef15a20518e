// Anonymous slow bodies at the IdP (red team, low: "held the connection ~53 s while the gateway closes at once"):
// a body trickled to an endpoint that reads it (the token endpoint) is answered 408 and its connection closed once
// the body timeout (10 s) has passed; a request answered before its body is read (the admin API without a bearer)
// is answered at once and its connection closed, without waiting for the rest. A real `platform idp`, raw sockets.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BODY_TIMEOUT_MS } from '../../lib/http.ts';
import { idpWithUser } from '../helpers/idp-with-user.ts';
import { CLI, postForm } from '../helpers/oauth.ts';

const f = idpWithUser({});

/** Sends `head`, then a body a byte every 50 ms that never ends (60 000 bytes declared), reading what comes back. */
function trickle(head: string) {
  const started = performance.now();
  const socket = connect(Number(new URL(f.idp.url).port), '127.0.0.1');
  let data = '';
  let closedAt: number | undefined;
  socket.on('data', (d) => {
    data += d.toString();
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    closedAt = performance.now();
    clearInterval(timer);
  });
  socket.write(`${head}\r\ncontent-length: 60000\r\n\r\ngrant_type=`);
  const timer = setInterval(() => {
    if (!socket.destroyed && socket.writable) socket.write('x');
  }, 50);
  return {
    data: () => data,
    status: () => Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0),
    /** How long the connection stayed open once the IdP closed it; fails past `limitMs`. */
    closed: async (limitMs: number) => {
      try {
        await expect.poll(() => closedAt, { timeout: limitMs, interval: 50 }).toBeDefined();
      } finally {
        clearInterval(timer);
        socket.destroy();
      }
      return closedAt! - started;
    },
  };
}

describe('slow bodies at the IdP', () => {
  it('a body trickled to the token endpoint: 408 invalid_request, the connection closed after the body timeout', async () => {
    const t = trickle(
      'POST /oauth/token HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded',
    );
    // The body timeout, and a little for the event loop; far below the ~53 s the red team measured.
    const open = await t.closed(DEFAULT_BODY_TIMEOUT_MS + 5000);
    expect(open).toBeGreaterThanOrEqual(DEFAULT_BODY_TIMEOUT_MS - 100);
    expect(t.status()).toBe(408);
    expect(t.data()).toMatch(/connection: close/i);
    expect(t.data()).toContain('"error":"invalid_request"');
  }, 30_000);

  it('a request refused before its body is read: answered at once and its connection closed', async () => {
    const t = trickle('POST /admin/api/users HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json');
    // Closed with the answer: well inside the body timeout, which it must not wait for.
    await t.closed(DEFAULT_BODY_TIMEOUT_MS - 2000);
    expect(t.status()).toBe(401);
  }, 30_000);

  it('a whole body is read as before (the token endpoint answers it)', async () => {
    const r = await postForm(`${f.idp.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: 'x',
      client_id: CLI,
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('invalid_grant');
  });
});
