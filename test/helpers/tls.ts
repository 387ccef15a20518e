import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCa {
  dir: string;
  caFile: string;
  ca: string;
  key: string;
  cert: string;
  cleanup(): Promise<void>;
}

/**
 * A throwaway CA and a server certificate it signed (openssl CLI), valid for `localhost`, 127.0.0.1, ::1 and
 * the extra names given. The CA file is what a test hands to PLATFORM_CIMD_CA_FILE.
 */
export async function createTestCa(names: readonly string[] = []): Promise<TestCa> {
  const dir = await mkdtemp(join(tmpdir(), 'platform-ca-'));
  const p = (f: string) => join(dir, f);
  await run('openssl', [
    ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2'],
    ...['-subj', '/CN=platform test CA', '-keyout', p('ca.key'), '-out', p('ca.pem')],
    ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
  ]);
  await run('openssl', [
    ...['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost'],
    ...['-keyout', p('server.key'), '-out', p('server.csr')],
  ]);
  const san = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...names.map((n) => `DNS:${n}`)].join(',');
  await writeFile(
    p('ext.cnf'),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
  );
  await run('openssl', [
    ...['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key')],
    ...['-CAcreateserial', '-days', '2', '-extfile', p('ext.cnf'), '-out', p('server.pem')],
  ]);
  return {
    dir,
    caFile: p('ca.pem'),
    ca: await readFile(p('ca.pem'), 'utf8'),
    key: await readFile(p('server.key'), 'utf8'),
    cert: await readFile(p('server.pem'), 'utf8'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

export interface TestHttpsServer {
  server: Server;
  port: number;
  /** TCP connections accepted so far: a refused fetch must leave this at 0. */
  connections(): number;
  requests(): number;
  close(): Promise<void>;
}

/** An https server on `host` (default 127.0.0.1) that counts every connection it accepts. */
export async function startHttpsServer(
  ca: TestCa,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  opts: { host?: string; server?: ServerOptions } = {},
): Promise<TestHttpsServer> {
  let connections = 0;
  let requests = 0;
  const server = createServer({ key: ca.key, cert: ca.cert, ...opts.server }, (req, res) => {
    requests++;
    handler(req, res);
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, opts.host ?? '127.0.0.1', () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
