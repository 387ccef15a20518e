// The gateway's cost per DPoP request, split (docs/gateway.md § What DPoP costs): the proof's verification
// (lib/dpop verifyDpopProof, ES256 and EdDSA, as the gateway calls it) beside the unit it is judged in — one
// node:crypto ES256 verification (bench/lib/es256-cost.ts) — and the replay cache (one Redis `SET NX EX`: wall
// time of the round trip, and this process's CPU for it). One process, no HTTP.
//   node bench/dpop-cost.ts        REDIS_URL (default redis://127.0.0.1:6379), BENCH_DPOP_N (default 3000)
import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { exportJWK, SignJWT } from 'jose';
import { processEnv } from '../cli/config.ts';
import { GATEWAY_DPOP_ALGORITHMS } from '../gateway/dpop/check.ts';
import { type DpopVerifyOptions, RedisDpopReplayStore, verifyDpopProof } from '../lib/dpop/index.ts';
import { es256VerifyBareMicros, es256VerifyMicros } from './lib/es256-cost.ts';

const env = processEnv();
const N = Number(env.BENCH_DPOP_N ?? 3000);
const HTU = 'https://mcp.example.test/bench/mcp';
const TOKEN = 'x'.repeat(800);
const ath = createHash('sha256').update(TOKEN).digest('base64url');

/** µs of wall and of CPU per call of `f`, run `n` times one after another. */
async function time(n: number, f: (i: number) => unknown): Promise<{ wall: number; cpu: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f(i);
  const wall = ((performance.now() - t0) * 1000) / n;
  const c = process.cpuUsage(cpu0);
  return { wall, cpu: (c.user + c.system) / n };
}

async function proofs(kind: 'ec' | 'ed25519', alg: string, n: number): Promise<string[]> {
  const { privateKey, publicKey } =
    kind === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519');
  const jwk = await exportJWK(publicKey);
  const now = Math.floor(Date.now() / 1000);
  return Promise.all(
    Array.from({ length: n }, () =>
      new SignJWT({ jti: randomUUID(), htm: 'POST', htu: HTU, iat: now, ath })
        .setProtectedHeader({ alg, typ: 'dpop+jwt', jwk })
        .sign(privateKey),
    ),
  );
}

/** µs of CPU and of wall per verification of `ps[from]` … `ps[from + n - 1]`, one after another (synchronous). */
function verifyTime(
  ps: string[],
  from: number,
  n: number,
  o: DpopVerifyOptions,
): { wall: number; cpu: number } {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = from; i < from + n; i++) verifyDpopProof(ps[i]!, o);
  const wall = ((performance.now() - t0) * 1000) / n;
  const c = process.cpuUsage(cpu0);
  return { wall, cpu: (c.user + c.system) / n };
}

const lines: string[] = [`DPoP cost per request, ${N} each, Node ${process.versions.node}`];
// The proofs and the unit they are judged in are measured in turns, ROUNDS of each, so that a neighbour's load on
// this shared machine weighs on both alike and the ratio holds when the µs move.
const ROUNDS = 6;
const proofCpu: Record<string, number> = {};
let es256Sum = 0;
for (const [kind, alg] of [
  ['ec', 'ES256'],
  ['ed25519', 'EdDSA'],
] as const) {
  const ps = await proofs(kind, alg, N + 200);
  const o = { method: 'POST', url: HTU, accessToken: TOKEN, algorithms: GATEWAY_DPOP_ALGORITHMS };
  verifyTime(ps, 0, 200, o); // warm-up (JIT; the key imported and held)
  const chunk = Math.floor(N / ROUNDS);
  let cpu = 0;
  let wall = 0;
  let es = 0;
  for (let round = 0; round < ROUNDS; round++) {
    es += es256VerifyMicros(chunk);
    const r = verifyTime(ps, 200 + round * chunk, chunk, o);
    cpu += r.cpu;
    wall += r.wall;
  }
  cpu /= ROUNDS;
  wall /= ROUNDS;
  es /= ROUNDS;
  es256Sum += es;
  proofCpu[alg] = cpu;
  lines.push(
    `proof verify ${alg}: ${cpu.toFixed(1)} µs CPU (${wall.toFixed(1)} µs wall) = ${(cpu / es).toFixed(2)} × one node:crypto ES256 verify (${es.toFixed(1)} µs CPU, measured in turns with it)`,
  );
}
const es256 = es256Sum / 2;
lines.push(
  `node:crypto ES256 verify (crypto.verify, {key, dsaEncoding: ieee-p1363}, one KeyObject, proof-sized input): ${es256.toFixed(1)} µs CPU`,
);
// The signature alone (the KeyObject passed bare, DER): what Node 24's key preparation adds to the form above.
const bare = es256VerifyBareMicros(N);
lines.push(
  `node:crypto ES256 verify, the KeyObject bare and a DER signature: ${bare.toFixed(1)} µs CPU (proof verify ES256 = ${(proofCpu.ES256! / bare).toFixed(2)} × it)`,
);
const redis = new Redis(env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const store = new RedisDpopReplayStore(redis);
const run = randomUUID();
await time(200, (i) => store.firstUse(`warm-${run}-${i}`, 'bench', 5));
const r = await time(N, (i) => store.firstUse(`${run}-${i}`, 'bench', 5));
lines.push(
  `replay SET NX EX (one at a time): ${r.cpu.toFixed(1)} µs CPU in this process, ${r.wall.toFixed(1)} µs wall (round trip)`,
);
// 50 in flight, as under the gateway benchmark's 50 connections: ioredis pipelines them on one connection.
const c0 = process.cpuUsage();
const t0 = performance.now();
for (let b = 0; b < N / 50; b++)
  await Promise.all(Array.from({ length: 50 }, (_, i) => store.firstUse(`${run}-c-${b}-${i}`, 'bench', 5)));
const cu = process.cpuUsage(c0);
const replayCpu = (cu.user + cu.system) / N;
lines.push(
  `replay SET NX EX (50 in flight): ${replayCpu.toFixed(1)} µs CPU per request, ${(((performance.now() - t0) * 1000) / N).toFixed(1)} µs wall per request`,
);
// What the goal is judged by (docs/gateway.md § What DPoP costs): proof + replay, against 2 × one ES256 verify.
const total = proofCpu.ES256! + replayCpu;
lines.push(
  `ES256 proof + replay (50 in flight): ${total.toFixed(1)} µs CPU = ${(total / es256).toFixed(2)} × one ES256 verify (budget 2 ×)`,
);
redis.disconnect();
process.stdout.write(`${lines.join('\n')}\n`);
