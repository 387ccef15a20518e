// Bare node:crypto RS256 signing rate on one core: the baseline every IdP figure is divided by.
// Signs the same kind of input a grant signs (a ~400-byte JWS signing input) with a 2048-bit key.
import { generateKeyPairSync, sign } from 'node:crypto';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const input = Buffer.from('x'.repeat(420));
const seconds = Number(process.argv[2] ?? 3);
for (let i = 0; i < 200; i++) sign('sha256', input, privateKey); // warm-up
let n = 0;
const cpu0 = process.cpuUsage();
const start = process.hrtime.bigint();
const until = start + BigInt(Math.round(seconds * 1e9));
let now = start;
while (now < until) {
  for (let i = 0; i < 50; i++) sign('sha256', input, privateKey);
  n += 50;
  now = process.hrtime.bigint();
}
const elapsed = Number(now - start) / 1e9;
// CPU time per signature as well: on a shared machine the wall-clock rate moves with the neighbours' load.
const cpu = process.cpuUsage(cpu0);
const cpuUsPerSign = (cpu.user + cpu.system) / n;
process.stdout.write(`${JSON.stringify({ signsPerSecond: n / elapsed, cpuUsPerSign })}\n`);
