// The load generator of `make bench-tools`, run pinned to core 1 with a JSON LoadSpec as its argument: the
// prebuilt requests of the spec's file over raw sockets (bench/lib/raw-load.ts). Prints one JSON LoadResult line.
import { readFileSync } from 'node:fs';
import { runRawLoad } from '../lib/raw-load.ts';
import type { LoadSpec } from './shape.ts';

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
const requests = (JSON.parse(readFileSync(spec.requestsFile, 'utf8')) as string[]).map((r) =>
  Buffer.from(r, 'base64'),
);
const result = await runRawLoad({
  url: spec.url,
  requests,
  connections: spec.connections,
  duration: spec.duration,
});
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
