// `make bench-gateway`'s measure of one ES256 verification with node:crypto (bench/lib/es256-cost.ts), run pinned
// to the core the gateway runs on, between the load runs: prints {"us": <CPU µs per verification as a JWS
// verifier makes it>, "bareUs": <the same with a bare KeyObject and a DER signature>}.
import { es256VerifyBareMicros, es256VerifyMicros } from '../lib/es256-cost.ts';

process.stdout.write(`${JSON.stringify({ us: es256VerifyMicros(), bareUs: es256VerifyBareMicros() })}\n`);
