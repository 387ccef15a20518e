// Running the docker and compose CLIs, and making sure a Docker Engine answers (starting dockerd as root).
import { execFile, spawn } from 'node:child_process';
import { existsSync, openSync } from 'node:fs';
import type { ContainerSuiteConfig } from './config.ts';

export interface RunResult {
  stdout: string;
  stderr: string;
}

export class CommandError extends Error {
  readonly stdout: string;
  readonly stderr: string;
  constructor(command: string, code: number | string | null, stdout: string, stderr: string) {
    super(`${command} exited ${code}: ${(stderr || stdout).trim().slice(-2000)}`);
    this.name = 'CommandError';
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

export function run(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      {
        env: opts.env ?? process.env,
        cwd: opts.cwd,
        timeout: opts.timeoutMs ?? 600_000,
        maxBuffer: 64 * 1024 * 1024,
        killSignal: 'SIGKILL',
      },
      (err, stdout, stderr) => {
        if (err) {
          const code = (err as { code?: number | string }).code ?? null;
          reject(new CommandError(`${file} ${args.slice(0, 3).join(' ')}`, code, stdout, stderr));
        } else resolve({ stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

async function engineAnswers(cfg: ContainerSuiteConfig): Promise<boolean> {
  try {
    await run(cfg.docker, ['version', '--format', '{{.Server.Version}}'], { timeoutMs: 10_000 });
    return true;
  } catch {
    return false;
  }
}

/**
 * A Docker Engine that answers. When the socket is silent and this is root, dockerd is started in the
 * background (it outlives the run: the next run reuses it and the images it holds) and waited for.
 */
export async function ensureEngine(cfg: ContainerSuiteConfig): Promise<string> {
  if (!(await engineAnswers(cfg))) {
    if (process.getuid?.() !== 0) {
      throw new Error(
        'no Docker Engine answers and this is not root: start dockerd (apt-get install docker.io docker-compose)',
      );
    }
    const log = openSync(cfg.dockerdLog, 'a');
    const dockerd = existsSync('/usr/sbin/dockerd') ? '/usr/sbin/dockerd' : 'dockerd';
    const child = spawn(dockerd, [], { detached: true, stdio: ['ignore', log, log] });
    child.on('error', () => {});
    child.unref();
    const deadline = Date.now() + 60_000;
    while (!(await engineAnswers(cfg))) {
      if (Date.now() > deadline) throw new Error(`dockerd did not answer within 60 s; see ${cfg.dockerdLog}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const { stdout } = await run(cfg.docker, ['version', '--format', '{{.Server.Version}}']);
  return stdout.trim();
}
