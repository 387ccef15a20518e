// `make bench-gateway`'s measure of one ES256 verification (bench/lib/es256-cost.ts), run pinned to the core the
// gateway runs on, between the load runs: prints {"us": <CPU µs per verification>}.
import { es256VerifyMicros } from '../lib/es256-cost.ts';

process.stdout.write(`${JSON.stringify({ us: es256VerifyMicros() })}\n`);
