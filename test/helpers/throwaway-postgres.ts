import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './processes.ts';

/**
 * A Postgres cluster of the test's own on a free port, so a test can stop and restart a database without
 * touching the machine's shared one. initdb refuses to run as root, so as root it runs as `postgres`.
 */
export interface ThrowawayPostgres {
  url: string;
  port: number;
  stop(): void;
  start(): void;
  destroy(): void;
}

function asPostgresUser(cmd: string, args: string[]) {
  const isRoot = process.getuid?.() === 0;
  const r = isRoot
    ? spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8' })
    : spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.stdout}`);
  return r.stdout;
}

export function havePgBinaries(): boolean {
  try {
    execFileSync('initdb', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'pg-throwaway-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  asPostgresUser('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () =>
    asPostgresUser('pg_ctl', ['-D', data, '-o', opts, '-w', '-l', join(dir, 'log'), 'start']);
  start();
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop: () => asPostgresUser('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']),
    destroy() {
      try {
        asPostgresUser('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
