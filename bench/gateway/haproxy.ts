// The benchmark's reference proxies: HAProxy (Debian's haproxy, 2.6 on bookworm) verifying RS256 in C — the
// reference the issue names — and HAProxy doing the gateway's whole per-request job. Optional: without an
// `haproxy` binary the benchmark says so in one line and measures the gateway alone.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import type { KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { deriveIdentityKey, EMPTY_BODY_SHA256 } from '../../lib/identity.ts';
import { PIN } from './processes.ts';
import { AUDIENCE, SERVICE } from './shape.ts';

/**
 * The haproxy binary and its version: `setting` (BENCH_HAPROXY) when given, else `haproxy` on PATH, then
 * /usr/sbin where Debian puts it; undefined when there is none or the setting is `off`.
 */
export function findHaproxy(setting?: string): { bin: string; version: string } | undefined {
  if (setting === 'off') return undefined;
  for (const bin of setting ? [setting] : ['haproxy', '/usr/sbin/haproxy']) {
    try {
      const out = execFileSync(bin, ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      const version = /HA-?Proxy version (\d+(?:\.\d+)*)/.exec(out)?.[1] ?? 'unknown';
      return { bin, version };
    } catch {
      // not this one
    }
  }
  return undefined;
}

export interface HaproxySetup {
  dir: string;
  port: number;
  upstream: URL;
  issuer: string;
  publicKey: KeyObject;
  identitySecret: string;
}

/**
 * What the reference proxy is configured to do on every request:
 * - `rs256`: the reference, "HAProxy 2.6 verifying RS256 in C": the bearer's signature verified with
 *   `jwt_verify` against the issuer's key (HAProxy has no verified-token cache) and `Authorization` removed;
 *   nothing else — no claim checks, no identity headers.
 * - `gateway`: the gateway's job on this shape: the above, plus `iss`, `aud`, `exp`/`iat` with 60 s leeway and
 *   the `mcp:<service>` scope checked, inbound `x-platform-*` removed, the body buffered whole
 *   (`option http-buffer-request`) and hashed (`req.body,sha2(256)`), the eight identity headers added with
 *   signature v2 — HMAC-SHA256 keyed by the service's own key over
 *   `v2\nt\nservice\nMETHOD\npath-with-query\nbody-sha256\nemail\nsub\nissuer\nscope\nclient-id\njti\nrequest-id`
 *   (lib/identity.ts) — and a request id on the request and the response. Still without the revocation lookups
 *   (they would need Lua and a Redis client), the routing and guards of a multi-service gateway, and the body
 *   limit and timeout (HAProxy hashes what fits its buffer, tune.bufsize, 16 KiB: enough for this shape's body).
 *   The service key is derived once here, as the gateway derives it once at start-up.
 */
export type HaproxyJob = 'rs256' | 'gateway';

export function haproxyConfig(s: HaproxySetup, pemPath: string, job: HaproxyJob): string {
  const verify = `  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('$.alg')
  http-request deny deny_status 401 unless { var(txn.alg) -m str RS256 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.alg,"${pemPath}") -m int 1 }
`;
  // HAProxy takes the HMAC key base64-encoded; the key is the 64-character hex string's own bytes.
  const key = Buffer.from(deriveIdentityKey(s.identitySecret, SERVICE)).toString('base64');
  const rules =
    job === 'rs256'
      ? `${verify}  http-request del-header authorization
`
      : `  option http-buffer-request
  unique-id-format %[uuid()]
  http-request del-header x-platform- -m beg
${verify}  http-request set-var(txn.now) date()
  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('$.exp','int')
  http-request set-var(txn.iat) var(txn.bearer),jwt_payload_query('$.iat','int')
  http-request deny deny_status 401 if { var(txn.exp),sub(txn.now) -m int lt -60 }
  http-request deny deny_status 401 if { var(txn.iat),sub(txn.now) -m int gt 60 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_payload_query('$.iss') -m str ${s.issuer} }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_payload_query('$.aud') -m str ${AUDIENCE} }
  http-request set-var(txn.scope) var(txn.bearer),jwt_payload_query('$.scope')
  http-request deny deny_status 403 unless { var(txn.scope) -m sub mcp:${SERVICE} }
  http-request set-var(txn.email) var(txn.bearer),jwt_payload_query('$.email'),lower
  http-request set-var(txn.sub) var(txn.bearer),jwt_payload_query('$.sub')
  http-request set-var(txn.cid) var(txn.bearer),jwt_payload_query('$.client_id')
  http-request set-var(txn.jti) var(txn.bearer),jwt_payload_query('$.jti')
  http-request set-var(txn.bodyhash) req.body,sha2(256),hex,lower
  http-request set-var(txn.bodyhash) str(${EMPTY_BODY_SHA256}) unless { var(txn.bodyhash) -m found }
  http-request set-var-fmt(txn.msg) "v2\\n%[var(txn.now)]\\n${SERVICE}\\n%[method]\\n%[pathq]\\n%[var(txn.bodyhash)]\\n%[var(txn.email)]\\n%[var(txn.sub)]\\nplatform\\n%[var(txn.scope)]\\n%[var(txn.cid)]\\n%[var(txn.jti)]\\n%[unique-id]"
  http-request del-header authorization
  http-request set-header x-platform-user-email %[var(txn.email)]
  http-request set-header x-platform-user-sub %[var(txn.sub)]
  http-request set-header x-platform-issuer platform
  http-request set-header x-platform-scope %[var(txn.scope)]
  http-request set-header x-platform-client-id %[var(txn.cid)]
  http-request set-header x-platform-jti %[var(txn.jti)]
  http-request set-header x-request-id %[unique-id]
  http-request set-header x-platform-identity t=%[var(txn.now)],v2=%[var(txn.msg),hmac(sha256,${key}),hex,lower]
  http-response set-header x-request-id %[unique-id]
`;
  return `global
  nbthread 1
  log stderr format raw local0 warning

defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s

frontend gateway
  bind 127.0.0.1:${s.port}
${rules}  default_backend tools

backend tools
  server upstream ${s.upstream.host}
`;
}

/** Writes the key and configuration into `dir` and starts HAProxy in the foreground, pinned to `core`. */
export async function startHaproxy(
  bin: string,
  core: number,
  s: HaproxySetup,
  job: HaproxyJob,
): Promise<ChildProcess> {
  const pemPath = join(s.dir, 'platform-issuer.pem');
  writeFileSync(pemPath, s.publicKey.export({ type: 'spki', format: 'pem' }) as string);
  const cfgPath = join(s.dir, `haproxy-${job}.cfg`);
  writeFileSync(cfgPath, haproxyConfig(s, pemPath, job));
  const args = ['-db', '-f', cfgPath];
  const [cmd, argv] = PIN ? ['taskset', ['-c', String(core), bin, ...args]] : [bin, args];
  const child = spawn(cmd as string, argv as string[], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const deadline = Date.now() + 10_000;
  while (!(await accepts(s.port))) {
    if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode}):\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`haproxy did not listen on ${s.port}:\n${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return child;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
