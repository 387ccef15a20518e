// lib/telemetry/mcp-scan.ts against what JSON.parse reads: the gateway names its spans from a scan of the raw
// body instead of a parse, and must name exactly what a parse would (or nothing when the body is not JSON).
import { describe, expect, it } from 'vitest';
import { mcpRequestInfo } from '../../lib/telemetry/request.ts';

/** The reading by JSON.parse (what mcpRequestInfo does with a string body). */
const parsed = (body: Buffer) => mcpRequestInfo(body.toString('utf8'));
const scanned = (body: Buffer) => mcpRequestInfo(body);

const BODIES = [
  '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"propose_deal_closure","arguments":{"deal_id":"D-1042","metrics":[{"name":"ebitda","value":12.5}],"citations":["sha256:9f"]}}}',
  '{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}',
  '{"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v"}}}',
  '{"method":"tools/call","params":{"_meta":{"traceparent":"tp1"},"name":"a","_meta":{"tracestate":"only"}}}',
  '{"method":"tools/call","params":{"name":"first","_meta":{"traceparent":"tp"}},"params":{"name":"second"}}',
  '{"method":"x","method":"tools/call","params":{"name":"n"},"id":1,"id":null}',
  '{"method":"tools/call","params":["name"],"id":-0}',
  '{"method":"tools/call","params":{"name":7,"_meta":[1]},"id":1.50e+2}',
  '{"method":"tools/call","params":{"name":"a","_meta":{"traceparent":5,"tracestate":"s"}}}',
  '{"\\u006dethod":"tools\\/call","params":{"n\\u0061me":"caf\\u00e9 \\ud83d\\ude00 \\"q\\"","_meta":{"traceparent":"t\\n"}},"id":"\\u0031"}',
  '{"method":"tools/call","params":{"name":"héllo wörld ✓"}}',
  '  \n\t{ "method" : "ping" , "id" : 0 }  \r\n',
  '[{"method":"tools/call","id":1,"params":{"name":"a"}},{"method":"b"}]',
  '[]',
  '[1,{"method":"a"}]',
  '[[{"method":"a"}]]',
  '"just a string"',
  '42',
  'null',
  '{"method":5}',
  '{"method":null,"id":3}',
  '{}',
  '{"id":1e400,"method":"a"}',
  '{"id":123456789012345678901234567890,"method":"a"}',
  '{"id":true,"method":"a","params":null}',
  '{"method":"a","params":"str"}',
  '{"method":"a","__proto__":{"x":1},"params":{"__proto__":{"name":"p"}}}',
  // Invalid JSON: nothing is named.
  '{"method":"tools/call",}',
  '{"method":"tools/call"',
  '{"method":"tools/call"} x',
  '{"method":"tools/call","id":01}',
  '{"method":"tools/call","id":1.}',
  '{"method":"tools/call","id":-}',
  '{"method":"tools/call","id":.5}',
  '{"method":"tools/call","id":1e}',
  '{"method":"a\\x"}',
  '{"method":"a\\u12g4"}',
  '{"method":"a\u0001b"}',
  '{"method":"tools/call","params":{"name":"a",}}',
  '{"method":"a","x":[1,2,]}',
  '{"method":"a","x":tru}',
  '{"method":"a","x":nulll}',
  "{'method':'a'}",
  '{method:"a"}',
  '[{"method":"a"},]',
  '[{"method":"a"}',
  '{"method":"a"}}',
  '{"a":1 "method":"b"}',
];

describe('the span fields scanned from a raw body', () => {
  it('are what JSON.parse reads, for each case', () => {
    for (const b of BODIES) {
      const body = Buffer.from(b, 'utf8');
      expect(scanned(body), b).toEqual(parsed(body));
    }
  });

  it('are what JSON.parse reads for bodies cut, spliced and flipped at random', () => {
    // A fixed generator: the same mutations on every run.
    let seed = 0x2545f491;
    const rand = (n: number) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const alphabet = Buffer.from('{}[]",:\\ \nu0aeE+-.9tfnl');
    let named = 0;
    for (let k = 0; k < 20_000; k++) {
      const body = Buffer.from(BODIES[rand(BODIES.length)]!, 'utf8');
      const edits = 1 + rand(3);
      let out = body;
      for (let e = 0; e < edits; e++) {
        const at = rand(out.length + 1);
        const op = rand(3);
        const c = Buffer.of(alphabet[rand(alphabet.length)]!);
        out =
          op === 0
            ? Buffer.concat([out.subarray(0, at), c, out.subarray(at)])
            : op === 1
              ? Buffer.concat([out.subarray(0, at), out.subarray(at + 1)])
              : Buffer.concat([out.subarray(0, at), c, out.subarray(at + 1)]);
      }
      const want = parsed(out);
      if (want.method !== undefined) named++;
      expect(scanned(out), out.toString('utf8')).toEqual(want);
    }
    // The mutations keep enough bodies valid for the comparison to mean something.
    expect(named).toBeGreaterThan(2_000);
  });

  it('names nothing for an empty body or invalid UTF-8 outside strings', () => {
    expect(scanned(Buffer.alloc(0)).method).toBeUndefined();
    const bad = Buffer.concat([Buffer.from('{"method":"a"'), Buffer.of(0xff), Buffer.from('}')]);
    expect(scanned(bad)).toEqual(parsed(bad));
    const inString = Buffer.concat([Buffer.from('{"method":"a'), Buffer.of(0xe2, 0x82), Buffer.from('"}')]);
    expect(scanned(inString)).toEqual(parsed(inString));
  });
});
