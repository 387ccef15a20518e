// The depth scanner against an independent count (recursion over JSON.parse's result) and the cases a byte scan
// could get wrong: brackets in strings, escaped quotes and backslashes, multi-byte UTF-8, early stop.
import { describe, expect, it } from 'vitest';
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../lib/json-depth.ts';

const nested = (levels: number, inner = '1') => `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;
const bytes = (s: string) => Buffer.from(s, 'utf8');

function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v !== null && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

describe('jsonTooDeep', () => {
  it('allows 64 levels and refuses 65, arrays and objects alike', () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(jsonTooDeep(bytes(nested(64)))).toBe(false);
    expect(jsonTooDeep(bytes(nested(65)))).toBe(true);
    const objects = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
    expect(jsonTooDeep(bytes(objects(64)))).toBe(false);
    expect(jsonTooDeep(bytes(objects(65)))).toBe(true);
  });

  it('does not count brackets inside strings, escapes respected', () => {
    expect(jsonTooDeep(bytes(JSON.stringify({ s: '['.repeat(1000) })))).toBe(false);
    expect(jsonTooDeep(bytes(JSON.stringify(['\\', '['.repeat(100), '"[[[', '\\"[[['])))).toBe(false);
    // An escaped quote does not end the string; an escaped backslash before the quote does.
    expect(jsonTooDeep(bytes(`["\\"${'['.repeat(100)}"]`))).toBe(false);
    expect(jsonTooDeep(bytes(`["\\\\",${nested(64)}]`))).toBe(true);
    expect(jsonTooDeep(bytes(JSON.stringify({ 'é[€': ['ü', '😀['] })))).toBe(false);
  });

  it('agrees with the depth of the parsed value on generated documents', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const gen = (d: number): unknown => {
      if (d === 0 || rnd(4) === 0) return ['x"[{\\', 1, null, 'ü]}'][rnd(4)];
      const n = rnd(3);
      if (rnd(2)) return Array.from({ length: n + 1 }, () => gen(d - 1));
      return Object.fromEntries(Array.from({ length: n + 1 }, (_, i) => [`k${i}[`, gen(d - 1)]));
    };
    for (let i = 0; i < 500; i++) {
      const text = JSON.stringify(gen(rnd(80)));
      const d = depthOf(JSON.parse(text));
      expect(jsonTooDeep(bytes(text), d), text).toBe(false);
      if (d > 0) expect(jsonTooDeep(bytes(text), d - 1), text).toBe(true);
    }
  });

  it('stops at the first level past the bound: 10 000 levels, or an unterminated flood', () => {
    expect(jsonTooDeep(bytes(nested(10_000)))).toBe(true);
    expect(jsonTooDeep(bytes('['.repeat(5_000_000)))).toBe(true);
    expect(jsonTooDeep(bytes(''))).toBe(false);
    expect(jsonTooDeep(bytes('not json ]]]'))).toBe(false);
  });
});
