// One process of an MCP client keeping its own refresh-token chain, as a separate Node process (its own
// connections): started with the token it holds, it waits for `go` on stdin, refreshes `rounds + 1` times from
// what it got (the first presentation is the shared token), calls the `whoami` tool through the gateway with the
// access token every `callEvery` rotations, and prints its result as one JSON line. Run directly, it is the child;
// imported, `startRefreshChain` spawns one. With `dpopJwk` (the client's DPoP key, shared by its processes),
// every refresh and every tool call carries a fresh proof by it.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { JWK } from 'jose';
import { dpopFetch, dpopKeyFrom, postFormWithProof, type TestDpopKey } from './dpop-client.ts';

export interface ChainConfig {
  issuer: string;
  clientId: string;
  refreshToken: string;
  /** `{gateway}/platform/mcp` is called with each `callEvery`-th access token. */
  gatewayUrl: string;
  rounds: number;
  callEvery: number;
  /** The private JWK (with `alg`) of the key the tokens are bound to. */
  dpopJwk?: JWK;
}

export interface ChainResult {
  /** Successful refreshes, the first (shared) presentation included. */
  refreshes: number;
  /** The first refusal, if any: `round: status body`. */
  refused?: string;
  /** One line per tool call: `email client_id` as `whoami` answered, or what went wrong. */
  calls: string[];
  /** Every refresh token the chain received, in order. */
  refreshTokens: string[];
  accessTokens: string[];
}

export interface RefreshChain {
  /** Resolves once the child has loaded and waits for `go`. */
  ready: Promise<void>;
  go(): void;
  result: Promise<ChainResult>;
}

export function startRefreshChain(cfg: ChainConfig): RefreshChain {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), JSON.stringify(cfg)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const lines = createInterface({ input: child.stdout });
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  const result = new Promise<ChainResult>((resolve, reject) => {
    lines.on('line', (line) => {
      if (line === 'ready') onReady();
      else resolve(JSON.parse(line) as ChainResult);
    });
    child.on('close', (code) => reject(new Error(`refresh chain process exited ${code}: ${stderr}`)));
  });
  return { ready, go: () => child.stdin.end('go\n'), result };
}

async function whoami(gatewayUrl: string, token: string, key?: TestDpopKey): Promise<string> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import(
    '@modelcontextprotocol/sdk/client/streamableHttp.js'
  );
  const transport = new StreamableHTTPClientTransport(
    new URL(`${gatewayUrl}/platform/mcp`),
    key
      ? { fetch: dpopFetch(key.session, () => token) }
      : { requestInit: { headers: { authorization: `Bearer ${token}` } } },
  );
  const client = new Client({ name: 'concurrent-refresh', version: '1.0.0' });
  try {
    await client.connect(transport);
    const r = (await client.callTool({ name: 'whoami', arguments: {} })) as {
      isError?: boolean;
      structuredContent?: { email?: string; client_id?: string };
      content?: Array<{ text?: string }>;
    };
    if (r.isError || !r.structuredContent) return `tool error: ${r.content?.[0]?.text}`;
    return `${r.structuredContent.email} ${r.structuredContent.client_id}`;
  } catch (err) {
    return `call failed: ${(err as Error).message}`;
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

async function runChild(cfg: ChainConfig): Promise<ChainResult> {
  const out: ChainResult = { refreshes: 0, calls: [], refreshTokens: [], accessTokens: [] };
  let current = cfg.refreshToken;
  const key = cfg.dpopJwk ? await dpopKeyFrom(cfg.dpopJwk) : undefined;
  for (let round = 0; round <= cfg.rounds; round++) {
    const res = await postFormWithProof(
      `${cfg.issuer}/oauth/token`,
      { grant_type: 'refresh_token', refresh_token: current, client_id: cfg.clientId },
      key,
    );
    if (res.status !== 200) {
      out.refused = `round ${round}: ${res.status} ${res.text}`;
      return out;
    }
    const json = res.json as { access_token: string; refresh_token: string };
    out.refreshes++;
    out.refreshTokens.push(json.refresh_token);
    out.accessTokens.push(json.access_token);
    current = json.refresh_token;
    if (round % cfg.callEvery === 0) out.calls.push(await whoami(cfg.gatewayUrl, json.access_token, key));
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const cfg = JSON.parse(process.argv[2] ?? '{}') as ChainConfig;
  // Load the MCP client before saying ready, so both processes start refreshing at the same moment.
  await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'go') break;
  }
  process.stdout.write(`${JSON.stringify(await runChild(cfg))}\n`);
}
