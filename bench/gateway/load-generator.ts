// The benchmark's load generator, run by bench/gateway-proxy.ts (pinned to core 1) with a JSON LoadSpec as its
// argument; prints one JSON LoadResult line.
import { createHash, createPrivateKey, type JsonWebKey, sign } from 'node:crypto';
import { processEnv } from '../../cli/config.ts';
import { loadGatewayBenchConfig } from '../config.ts';
import { runRawLoad } from '../lib/raw-load.ts';
import { type LoadResult, type LoadSpec, REQUEST_BODY, SERVICE } from './shape.ts';

/** BENCH_LOADGEN=autocannon: the same load through autocannon, whose latencies are whole milliseconds. */
async function runAutocannon(spec: LoadSpec): Promise<void> {
  // autocannon ships no type declarations; the specifier is a variable so the import is typed by the cast below.
  const specifier = 'autocannon';
  const { default: autocannon } = (await import(specifier)) as unknown as {
    default: (opts: Record<string, unknown>) => Promise<{
      requests: { average: number; total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
      timeouts: number;
    }>;
  };
  // Each connection walks the same list of prebuilt requests, one token each.
  const requests = spec.tokens.map((t) => ({
    method: 'POST',
    path: `/${SERVICE}/mcp`,
    headers: {
      authorization: `Bearer ${t}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: REQUEST_BODY,
  }));
  const r = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.duration,
    requests,
  });
  // autocannon's latencies are whole milliseconds.
  const result: LoadResult = {
    requestsPerSecond: r.requests.total / spec.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

/**
 * The default: the 50 requests prebuilt, one per token, over raw sockets (bench/lib/raw-load.ts; latencies in µs,
 * where autocannon's whole milliseconds read as p50 = 0 for a sub-millisecond upstream).
 */
async function runLoad(spec: LoadSpec): Promise<void> {
  const target = new URL(spec.url);
  const body = Buffer.from(REQUEST_BODY);
  const request = (authorization: string) =>
    Buffer.concat([
      Buffer.from(
        `POST /${SERVICE}/mcp HTTP/1.1\r\nHost: ${target.host}\r\nAuthorization: ${authorization}\r\n` +
          'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
          `Content-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]);
  let requests: Buffer[] | ((n: number) => Buffer);
  if (spec.dpop) {
    // A fresh proof per request (the gateway accepts each once), signed here on the load generator's core.
    const proofs = dpopProofs(spec.dpop.keys, spec.tokens, spec.dpop.htu);
    const n = spec.tokens.length;
    requests = (i) => request(`DPoP ${spec.tokens[i % n]}\r\nDPoP: ${proofs(i % n)}`);
  } else requests = spec.tokens.map((t) => request(`Bearer ${t}`));
  const result = await runRawLoad({
    url: spec.url,
    requests,
    connections: spec.connections,
    duration: spec.duration,
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

/** Proof builders per token: ES256 over `{jti, htm, htu, iat, ath}` with node:crypto (synchronous, ~30 µs). */
function dpopProofs(keys: JsonWebKey[], tokens: string[], htu: string): (i: number) => string {
  const prepared = keys.map((jwk, i) => {
    const { d: _d, ...pub } = jwk;
    const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'dpop+jwt', jwk: pub })).toString(
      'base64url',
    );
    const ath = createHash('sha256').update(tokens[i]!).digest('base64url');
    return { key: createPrivateKey({ key: jwk, format: 'jwk' }), header, ath };
  });
  let counter = 0;
  return (i) => {
    const p = prepared[i]!;
    const claims = {
      jti: `${process.pid}-${counter++}`,
      htm: 'POST',
      htu,
      iat: Math.floor(Date.now() / 1000),
      ath: p.ath,
    };
    const input = `${p.header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    const sig = sign('sha256', Buffer.from(input), { key: p.key, dsaEncoding: 'ieee-p1363' });
    return `${input}.${sig.toString('base64url')}`;
  };
}

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
if (loadGatewayBenchConfig(processEnv()).loadgen === 'autocannon') await runAutocannon(spec);
else await runLoad(spec);
