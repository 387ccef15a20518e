import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PLATFORM_BIN = fileURLToPath(new URL('../../bin/platform.js', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Parsed JSON log lines from stdout. */
  logs(): Array<Record<string, unknown>>;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** SIGTERM, then wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/**
 * Runs `platform <args>` as a real child process with exactly `env` (plus PATH); `bin` another checkout's
 * `bin/platform.js` (the previous release's, test/helpers/previous-release.ts). For a log review run:
 * TEST_LOG_LEVEL (e.g. `trace`) sets every process's LOG_LEVEL unless the test sets one, and TEST_LOG_DIR keeps
 * each process's whole output in a file there when it exits.
 */
export function startPlatform(
  args: string[],
  env: Record<string, string | undefined>,
  bin: string = PLATFORM_BIN,
): RunningProcess {
  const level = process.env.TEST_LOG_LEVEL;
  const child = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, ...(level ? { LOG_LEVEL: level } : {}), ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters: Array<() => void> = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      for (const w of waiters.splice(0)) w();
      resolve(code);
    }),
  );
  const logDir = process.env.TEST_LOG_DIR;
  // 'close': the output streams are drained too.
  if (logDir)
    child.once('close', () => appendFileSync(join(logDir, `${args[0] ?? 'platform'}-${child.pid}.log`), out));
  let exitCode: number | null | undefined;
  void exited.then((c) => {
    exitCode = c;
  });
  return {
    child,
    exited,
    output: () => out,
    logs: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            return {};
          }
        }),
    waitFor(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${pattern}; output:\n${out}`)),
          timeoutMs,
        );
        const check = () => {
          if (pattern.test(out)) {
            clearTimeout(timer);
            resolve();
          } else if (exitCode !== undefined) {
            clearTimeout(timer);
            reject(new Error(`process exited (${exitCode}) before ${pattern}; output:\n${out}`));
          } else waiters.push(check);
        };
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (exitCode !== undefined) return exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

let cachedKey: string | undefined;
/** A 2048-bit RSA private key as PKCS8 PEM (generated once per test file). */
export function testSigningKeyPem(): string {
  cachedKey ??= generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  return cachedKey;
}

export interface IdpProcess extends RunningProcess {
  url: string;
  issuer: string;
  audience: string;
}

/** A running `platform idp` on `port` (else a free one) against the given database and Redis. */
export async function startIdpProcess(opts: {
  databaseUrl: string;
  redisUrl: string;
  env?: Record<string, string>;
  /** Known before the IdP starts, so a gateway that trusts it can start alongside. */
  port?: number;
  /** Another checkout's bin/platform.js (default: this one's). */
  bin?: string;
}): Promise<IdpProcess> {
  const port = opts.port ?? (await freePort());
  const issuer = `http://127.0.0.1:${port}`;
  const audience = 'https://platform.test/api';
  const p = startPlatform(
    ['idp'],
    {
      IDP_PORT: String(port),
      PLATFORM_OIDC_ISSUER: issuer,
      PLATFORM_OIDC_PRIVATE_KEY: testSigningKeyPem(),
      PLATFORM_AUDIENCE: audience,
      DATABASE_URL: opts.databaseUrl,
      REDIS_URL: opts.redisUrl,
      ...opts.env,
    },
    opts.bin,
  );
  await p.waitFor(/idp listening/);
  return Object.assign(p, {
    url: issuer,
    issuer: opts.env?.PLATFORM_OIDC_ISSUER ?? issuer,
    audience: opts.env?.PLATFORM_AUDIENCE ?? audience,
  });
}

/**
 * The kernel's ephemeral range: where `listen(0)` and every outgoing connection take their local port. A port
 * freed there can be handed to a connection or another `listen(0)` before the process meant for it listens
 * (EADDRINUSE, seen in CI), so test ports come from below it.
 */
function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : 32_768;
  } catch {
    return 32_768;
  }
}
const TEST_PORTS_FROM = 15_000;
const TEST_PORTS_TO = ephemeralRangeStart();

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createNetServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A port nothing listens on, for a process about to listen on it: a random one below the ephemeral range (where
 * nothing takes it by itself meanwhile; see ephemeralRangeStart), checked by listening on it once. Where that
 * range leaves no room below it, whatever `listen(0)` gives.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; TEST_PORTS_TO - TEST_PORTS_FROM > 1000 && i < 50; i++) {
    const port = TEST_PORTS_FROM + Math.floor(Math.random() * (TEST_PORTS_TO - TEST_PORTS_FROM));
    if (await canListen(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface GatewayProcess extends RunningProcess {
  url: string;
  port: number;
}

/** A real `platform gateway` (on `port`, else a free one); resolves once it logs that it listens. */
export async function startGatewayProcess(
  env: Record<string, string | undefined>,
  port?: number,
  bin?: string,
): Promise<GatewayProcess> {
  const p = port ?? (await freePort());
  const proc = startPlatform(['gateway'], { GATEWAY_PORT: String(p), ...env }, bin);
  await proc.waitFor(/gateway listening/);
  return Object.assign(proc, { url: `http://127.0.0.1:${p}`, port: p });
}
