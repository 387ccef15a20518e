// Shared by the deploy tests: run `platform doctor` as a real process and read its rows back; the deployment
// files' locations.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Finished, runPlatform } from '../cli/support.ts';

export const DEPLOY_DIR = fileURLToPath(new URL('../../deploy/', import.meta.url));
export const REPO_DIR = fileURLToPath(new URL('../../', import.meta.url));

export function deployFile(name: string): string {
  return readFileSync(`${DEPLOY_DIR}${name}`, 'utf8');
}

export interface Row {
  verdict: string;
  ref: string;
  subject: string;
  name: string;
  detail: string;
}

export interface DoctorRun extends Finished {
  rows: Row[];
  ms: number;
}

/** `platform doctor <args>` with exactly `env`; rows parsed from its aligned columns (two or more spaces). */
export async function runDoctor(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<DoctorRun> {
  const started = Date.now();
  const r = await runPlatform(['doctor', ...args], env, 30_000);
  const rows = r.stdout
    .split('\n')
    .filter((l) => /^(PASS|FAIL|SKIP) {2}/.test(l))
    .map((l) => {
      const [verdict, ref, subject, name, ...detail] = l.split(/ {2,}/);
      return { verdict: verdict!, ref: ref!, subject: subject!, name: name!, detail: detail.join('  ') };
    });
  return { ...r, rows, ms: Date.now() - started };
}

/** The one row for a service and spec reference (or name, for the supplementary "-" rows). */
export function row(rows: Row[], subject: string, refOrName: string): Row {
  const found = rows.filter(
    (r) => r.subject === subject && (r.ref === refOrName || r.name.startsWith(refOrName)),
  );
  if (found.length !== 1)
    throw new Error(
      `expected one row ${subject} ${refOrName}, found ${found.length}:\n${JSON.stringify(rows, null, 1)}`,
    );
  return found[0]!;
}

/** `KEY=value` lines of an env file (compose's .env syntax as env.example uses it: no quotes). */
export function envFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/** Compose interpolation of `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`. */
export function interpolate(
  value: string,
  vars: Record<string, string>,
  used: Set<string> = new Set(),
): string {
  return value.replace(
    /\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}/g,
    (_m, name: string, op?: string, arg?: string) => {
      used.add(name);
      const v = vars[name];
      if (op === ':-') return v === undefined || v === '' ? (arg ?? '') : v;
      if (op === '-') return v === undefined ? (arg ?? '') : v;
      if (op === ':?') {
        if (v === undefined || v === '') throw new Error(`compose would stop: ${name}: ${arg}`);
        return v;
      }
      return v ?? '';
    },
  );
}

/**
 * A container's environment as its process would read it: each `<NAME>_FILE` variable names a path in `mounted`
 * (path in the container → the file's content), and is pointed at a copy of that file written into `dir`. A
 * `_FILE` variable naming a path nothing mounts throws, as the server would fail to read it.
 */
export function withMountedFiles(
  env: Record<string, string>,
  mounted: Record<string, string>,
  dir: string,
): Record<string, string> {
  const out = { ...env };
  for (const [name, path] of Object.entries(env)) {
    if (!name.endsWith('_FILE') || path === '') continue;
    const content = mounted[path];
    if (content === undefined) throw new Error(`${name} names ${path}, which nothing mounts`);
    const copy = join(dir, path.replaceAll('/', '_'));
    writeFileSync(copy, content, { mode: 0o600 });
    out[name] = copy;
  }
  return out;
}
