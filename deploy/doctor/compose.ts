import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { parse } from 'yaml';

// What the doctor knows of a compose deployment: the file (services, mounts) and its running containers, found
// by compose's labels through the docker CLI, so the checks work the same with Compose v2 and docker-compose 1.

export interface ComposeService {
  name: string;
  command?: string[];
  volumes?: string[];
  profiles?: string[];
  networks?: Record<string, { aliases?: string[] } | null> | string[];
}

export interface Container {
  id: string;
  name: string;
  service: string;
  running: boolean;
  /** `healthy`, `unhealthy`, `starting`, or `none` (no health check). */
  health: string;
  env: ReadonlyMap<string, string>;
  image: string;
}

export interface ComposeTarget {
  file: string;
  dir: string;
  project: string;
  services: ReadonlyMap<string, ComposeService>;
  /** The variables compose interpolates the file with. */
  vars: Readonly<Record<string, string | undefined>>;
  containers(service: string): Promise<Container[]>;
  logs(container: Container): Promise<string>;
  exec(container: Container, argv: string[]): Promise<{ code: number; out: string }>;
}

function run(docker: string, args: string[], timeoutMs: number): Promise<{ code: number; out: string }> {
  return new Promise((resolvePromise) => {
    execFile(docker, args, { timeout: timeoutMs, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? Number((err as { code?: unknown }).code) || 1 : 0;
      resolvePromise({ code, out: `${stdout}${stderr}` });
    });
  });
}

/** `KEY=value` lines of the .env beside the compose file, as compose itself reads them. */
function dotEnv(dir: string): Record<string, string> {
  try {
    const out: Record<string, string> = {};
    for (const line of readFileSync(resolve(dir, '.env'), 'utf8').split('\n')) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
      if (m) out[m[1]!] = m[2]!;
    }
    return out;
  } catch {
    return {};
  }
}

/** Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `${VAR:?message}` in a path the doctor reads. */
export function interpolate(value: string, vars: Readonly<Record<string, string | undefined>>): string {
  return value.replace(
    /\$\{([A-Za-z0-9_]+)(?:(:?[-?])([^}]*))?\}/g,
    (_m, name: string, op?: string, arg?: string) => {
      const v = vars[name];
      if (op === ':-' || op === ':?')
        return v === undefined || v === '' ? (op === ':-' ? (arg ?? '') : '') : v;
      if (op === '-') return v === undefined ? (arg ?? '') : v;
      return v ?? '';
    },
  );
}

/** Compose's default project name: the directory's name, lowercased, other characters dropped. */
const defaultProject = (dir: string) =>
  basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '');

export function openCompose(o: {
  file: string;
  project: string | undefined;
  docker: string;
  timeoutMs: number;
  /** The environment compose would see; it wins over the .env file, as in compose. */
  env: Readonly<Record<string, string | undefined>>;
}): ComposeTarget {
  const file = resolve(o.file);
  const dir = dirname(file);
  const doc = parse(readFileSync(file, 'utf8'), { merge: true }) as {
    services?: Record<string, Omit<ComposeService, 'name'>>;
  };
  const services = new Map(
    Object.entries(doc.services ?? {}).map(([name, s]) => [name, { name, ...s } as ComposeService]),
  );
  const vars = { ...dotEnv(dir), ...o.env };
  const project = o.project ?? (vars.COMPOSE_PROJECT_NAME || undefined) ?? defaultProject(dir);
  const docker = (args: string[]) => run(o.docker, args, o.timeoutMs);
  return {
    file,
    dir,
    project,
    services,
    vars,
    async containers(service) {
      const ps = await docker([
        'ps',
        '-aq',
        '--filter',
        `label=com.docker.compose.project=${project}`,
        '--filter',
        `label=com.docker.compose.service=${service}`,
      ]);
      if (ps.code !== 0) throw new Error(`docker ps failed: ${ps.out.trim().slice(0, 200)}`);
      const ids = ps.out.split('\n').filter(Boolean);
      if (ids.length === 0) return [];
      const inspect = await docker(['inspect', ...ids]);
      if (inspect.code !== 0) throw new Error(`docker inspect failed: ${inspect.out.trim().slice(0, 200)}`);
      const raw = JSON.parse(inspect.out) as Array<{
        Id: string;
        Name: string;
        State: { Running: boolean; Health?: { Status: string } };
        Config: { Env?: string[]; Image: string };
      }>;
      return raw
        .map((c) => ({
          id: c.Id.slice(0, 12),
          name: c.Name.replace(/^\//, ''),
          service,
          running: c.State.Running,
          health: c.State.Health?.Status ?? 'none',
          image: c.Config.Image,
          env: new Map(
            (c.Config.Env ?? []).map((e) => {
              const i = e.indexOf('=');
              return [e.slice(0, i), e.slice(i + 1)] as [string, string];
            }),
          ),
        }))
        .sort((a, b) => a.name.localeCompare(b.name));
    },
    async logs(c) {
      return (await docker(['logs', c.id])).out;
    },
    exec(c, argv) {
      return docker(['exec', c.id, ...argv]);
    },
  };
}

/** The tool servers of the file: services whose command is `tool <name>`. */
export function toolServices(t: ComposeTarget): Array<{ service: string; tool: string; alias: string }> {
  const out: Array<{ service: string; tool: string; alias: string }> = [];
  for (const s of t.services.values()) {
    if (s.command?.[0] !== 'tool' || !s.command[1]) continue;
    const nets = s.networks && !Array.isArray(s.networks) ? Object.values(s.networks) : [];
    const alias = nets.flatMap((n) => n?.aliases ?? [])[0] ?? s.name;
    out.push({ service: s.name, tool: s.command[1], alias });
  }
  return out;
}
