// The benchmark's fixed shape, shared by the orchestrator, the upstream and the load generator.
import type { JsonWebKey } from 'node:crypto';
export const SERVICE = 'bench';
export const AUDIENCE = 'https://platform.bench/api';

// ~300 bytes: a realistic tools/call.
export const REQUEST_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: {
    name: 'propose_deal_closure',
    arguments: {
      deal_id: 'D-1042',
      metrics: [{ name: 'ebitda', value: 12.5, source_file: 'q3-financials.xlsx', location: 'Sheet1!B7' }],
      citations: ['sha256:9f2c4e1d7a'],
      idempotency_key: '2b0c7f0e-6f0d-4c53-9d8a-1f5b2c3d4e5f',
    },
  },
});

// ~500 bytes: a fixed JSON-RPC result.
export const RESPONSE_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 7,
  result: {
    content: [
      {
        type: 'text',
        text: JSON.stringify({
          artifact_id: 'a7f3c2e1-5b4d-4e8f-9a1b-2c3d4e5f6a7b',
          was_inserted: true,
          conflicts: [],
          citations: { durable: 1, fragile: 0 },
          schema_version: 1,
          skill: 'manual',
        }),
      },
    ],
    structuredContent: {
      artifact_id: 'a7f3c2e1-5b4d-4e8f-9a1b-2c3d4e5f6a7b',
      was_inserted: true,
      conflicts: [],
      citations: { durable: 1, fragile: 0 },
      schema_version: 1,
    },
    isError: false,
  },
});

export interface LoadSpec {
  url: string;
  tokens: string[];
  /** DPoP: token i is bound to private JWK keys[i]; each request gets a fresh proof for htu (and POST). */
  dpop?: { htu: string; keys: JsonWebKey[] };
  connections: number;
  duration: number;
}

export type { LoadResult } from '../lib/latencies.ts';
