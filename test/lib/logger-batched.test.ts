// lib/logger.ts: a tool server's lines go out in batches (BatchedOutput), whole, in order, at most BATCH_MS late,
// and are not lost when the process exits; the time field is formatted once per millisecond, as pino's isoTime.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BATCH_CHARS, BATCH_MS, BatchedOutput, createLogger, flushLogs, isoTime } from '../../lib/logger.ts';

/** An output recording each write it is handed. */
function recorder() {
  const writes: string[] = [];
  return { writes, write: (s: string) => void writes.push(s) };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('batched log output', () => {
  it('hands a burst of lines on in one write, whole and in order, within BATCH_MS', async () => {
    const inner = recorder();
    const log = createLogger({ name: 'batched', destination: inner, batched: true });
    for (let i = 0; i < 50; i++) log.info({ i }, 'line');
    expect(inner.writes).toHaveLength(0);
    await new Promise((r) => setTimeout(r, BATCH_MS + 30));
    expect(inner.writes).toHaveLength(1);
    const lines = inner.writes[0]!.trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; msg: string });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('a lone line is not held longer than BATCH_MS', async () => {
    const inner = recorder();
    const log = createLogger({ name: 'batched', destination: inner, batched: true });
    log.info('alone');
    await new Promise((r) => setTimeout(r, BATCH_MS + 30));
    expect(inner.writes.map((w) => JSON.parse(w).msg)).toEqual(['alone']);
  });

  it('hands lines on at once when BATCH_CHARS are held', () => {
    const inner = recorder();
    const log = createLogger({ name: 'batched', destination: inner, batched: true });
    const text = 'x'.repeat(1000);
    for (let i = 0; i * 1000 < BATCH_CHARS; i++) log.info({ text }, 'long');
    expect(inner.writes).toHaveLength(1);
    expect(inner.writes[0]!.length).toBeGreaterThanOrEqual(BATCH_CHARS);
  });

  it('flushLogs hands the held lines on', async () => {
    const inner = recorder();
    const log = createLogger({ name: 'batched', destination: inner, batched: true });
    log.info('held');
    await flushLogs(log, 100);
    expect(inner.writes.map((w) => JSON.parse(w).msg)).toEqual(['held']);
  });

  it('a process exiting at once still writes its held lines (stdout, the default output)', () => {
    const script = fileURLToPath(new URL('../../lib/logger.ts', import.meta.url));
    const code = `import { createLogger } from ${JSON.stringify(script)};
      const log = createLogger({ name: 'exit', batched: true });
      for (let i = 0; i < 3; i++) log.info({ i }, 'before exit');
      process.exit(0);`;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    expect(out.status).toBe(0);
    const lines = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number });
    expect(lines.map((l) => l.i)).toEqual([0, 1, 2]);
  });

  it('is opt-in: without `batched` each line is handed on as written', () => {
    const inner = recorder();
    const log = createLogger({ name: 'plain', destination: inner });
    log.info('one');
    log.info('two');
    expect(inner.writes).toHaveLength(2);
    expect(new BatchedOutput(recorder())).toBeInstanceOf(BatchedOutput);
  });
});

describe('the time field', () => {
  it("is pino's isoTime, formatted again when the millisecond changes", () => {
    const now = vi.spyOn(Date, 'now');
    now.mockReturnValue(1_795_000_000_123);
    expect(isoTime()).toBe(pino.stdTimeFunctions.isoTime());
    now.mockReturnValue(1_795_000_000_124);
    expect(isoTime()).toBe(',"time":"2026-11-18T11:06:40.124Z"');
    expect(isoTime()).toBe(pino.stdTimeFunctions.isoTime());
  });
});
