// The outbound-fetch budget's own rules (idp/outbound), with a load that counts its calls and a clock the test
// moves: what starts a cool-down, what does not, and what is shared. The real fetches through it are in
// test/idp/cimd-fetch.test.ts and test/security/outbound-fetches.test.ts.
import { describe, expect, it } from 'vitest';
import { createOutboundBudget, type FetchGate } from '../../idp/outbound/index.ts';

const url = new URL('https://keys.example/jwks');

function setup() {
  let clock = 1_000_000;
  const budget = createOutboundBudget({ now: () => clock });
  const gated: string[] = [];
  const gate: FetchGate = async (u) => void gated.push(u.href);
  return { budget, gate, gated, advance: (ms: number) => (clock += ms) };
}

describe('outbound-fetch budget', () => {
  it('a cacheable answer starts no cool-down: the next call fetches (the caller caches it)', async () => {
    const { budget, gate, gated } = setup();
    let loads = 0;
    const load = async () => ({ value: ++loads, cacheSeconds: 300 });
    expect(await budget.fetch(url, gate, load)).toBe(1);
    expect(await budget.fetch(url, gate, load)).toBe(2);
    expect(gated).toHaveLength(2);
  });

  it('a failure is answered again without a fetch or a count for 30 s, then fetched again', async () => {
    const { budget, gate, gated, advance } = setup();
    let loads = 0;
    const load = async (): Promise<{ value: number; cacheSeconds: number }> => {
      loads++;
      throw new Error(`down ${loads}`);
    };
    await expect(budget.fetch(url, gate, load)).rejects.toThrow('down 1');
    advance(29_999);
    await expect(budget.fetch(url, gate, load)).rejects.toThrow('down 1');
    expect({ loads, counted: gated.length }).toEqual({ loads: 1, counted: 1 });
    advance(2);
    await expect(budget.fetch(url, gate, load)).rejects.toThrow('down 2');
    expect(gated).toHaveLength(2);
  });

  it('an uncacheable answer is reused for the cool-down, another URL is not affected', async () => {
    const { budget, gate, advance } = setup();
    let loads = 0;
    const load = async () => ({ value: ++loads, cacheSeconds: 0 });
    expect(await budget.fetch(url, gate, load)).toBe(1);
    expect(await budget.fetch(url, gate, load)).toBe(1);
    expect(await budget.fetch(new URL('https://keys.example/jwks?2'), gate, load)).toBe(2);
    advance(30_001);
    expect(await budget.fetch(url, gate, load)).toBe(3);
  });

  it('a refusal by the gate fetches nothing and starts no cool-down', async () => {
    const { budget } = setup();
    let loads = 0;
    const load = async () => ({ value: ++loads, cacheSeconds: 0 });
    const refusing: FetchGate = async () => {
      throw new Error('429');
    };
    await expect(budget.fetch(url, refusing, load)).rejects.toThrow('429');
    expect(loads).toBe(0);
    expect(await budget.fetch(url, async () => {}, load)).toBe(1);
  });

  it('calls for a URL whose fetch is in flight share it, uncounted', async () => {
    const { budget, gate, gated } = setup();
    let loads = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const load = async () => {
      loads++;
      await held;
      return { value: 'keys', cacheSeconds: 300 };
    };
    const first = budget.fetch(url, gate, load);
    // Once the first has passed the gate, the others join its fetch.
    await new Promise((r) => setImmediate(r));
    const all = Promise.all([first, ...Array.from({ length: 9 }, () => budget.fetch(url, gate, load))]);
    release();
    expect(await all).toEqual(Array(10).fill('keys'));
    expect({ loads, counted: gated.length }).toEqual({ loads: 1, counted: 1 });
  });
});
