// Secrets never reach a log line: the redaction paths cover a line's own members one level down; an error,
// logged whole on the unexpected paths, carries whatever its library put in it, at any depth.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/logger.ts';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    name: 't',
    destination: { write: (l: string) => void lines.push(JSON.parse(l)) },
  });
  return { log, lines, text: () => JSON.stringify(lines) };
}

describe('log redaction', () => {
  it('redacts secret members nested anywhere in a logged error, keeping the rest', () => {
    const { log, lines, text } = capture();
    const cause = Object.assign(new Error('upstream said no'), { response: { password: 'secret-cause' } });
    const err = Object.assign(new Error('token exchange failed', { cause }), {
      status: 502,
      detail: { token: 'secret-detail', kept: 'visible' },
      request: { headers: { Authorization: 'Bearer secret-header', accept: 'application/json' } },
      command: { name: 'set', args: [{ refresh_token: 'secret-array' }, 'plain'] },
      inner: new AggregateError([Object.assign(new Error('one'), { client_secret: 'secret-aggregate' })]),
    });
    log.error({ err }, 'unexpected error');
    expect(text()).not.toMatch(/secret-/);
    const e = lines[0]!.err as {
      message: string;
      type: string;
      status: number;
      detail: unknown;
      request: { headers: unknown };
      command: { args: unknown };
    };
    expect(e.message).toContain('token exchange failed');
    expect(e.type).toBe('Error');
    expect(e.status).toBe(502);
    expect(e.detail).toEqual({ token: '[redacted]', kept: 'visible' });
    expect(e.request.headers).toEqual({ Authorization: '[redacted]', accept: 'application/json' });
    expect(e.command.args).toEqual([{ refresh_token: '[redacted]' }, 'plain']);
  });

  it('scrubs an `err` that is not an Error, survives cycles and bounds the depth', () => {
    const { log, lines, text } = capture();
    const loop: Record<string, unknown> = { id_token: 'secret-loop' };
    loop.self = loop;
    let deep: Record<string, unknown> = { token: 'secret-deep' };
    for (let i = 0; i < 20; i++) deep = { next: deep };
    const shared = { kept: 'both places' };
    log.warn(
      { err: { body: { access_token: 'secret-plain' }, loop, deep, a: shared, b: shared } },
      'odd error',
    );
    expect(text()).not.toMatch(/secret-/);
    const e = lines[0]!.err as { loop: { self: unknown }; deep: unknown; a: unknown; b: unknown };
    expect(e.loop.self).toBe('[circular]');
    // An object met twice, not inside itself, is not a cycle.
    expect(e.b).toEqual({ kept: 'both places' });
    expect(JSON.stringify(e.deep)).toContain('[too deep]');
  });

  it('still redacts a line’s own members one level down', () => {
    const { log, lines } = capture();
    log.info({ body: { refresh_token: 'secret-body', grant_type: 'refresh_token' } }, 'line');
    expect(lines[0]!.body).toEqual({ refresh_token: '[redacted]', grant_type: 'refresh_token' });
  });
});
