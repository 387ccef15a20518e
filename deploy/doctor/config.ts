import { existsSync } from 'node:fs';
import { ConfigError, type Env, httpUrl, optionalString, secret } from '../../lib/config.ts';
import { isServiceName } from '../../lib/service-name.ts';
import { TOOL_SERVICES } from '../../tools/config.ts';

// `platform doctor`'s settings: flags first, then the environment. The only module of the doctor that reads
// the environment object it is given.

export interface DoctorFlags {
  baseUrl: string;
  /** One service, or several separated by commas; absent: the tool servers this package ships. */
  service?: string;
  /** An access token for the checks that need one (#14); wins over PLATFORM_TOKEN. */
  token?: string;
  /** The deployment's compose file: adds the container and file checks (#1, #6-#10, #15, #16). */
  compose?: string;
  /** Its compose project; default: COMPOSE_PROJECT_NAME, else the .env beside the file, else its folder. */
  project?: string;
}

export interface DoctorConfig {
  /** `{base_url}`: the public origin (and path, if any) the tunnel serves, without a trailing slash. */
  baseUrl: string;
  services: readonly string[];
  token: string | undefined;
  /** Deadline of one HTTP exchange (connect, headers and body together). */
  timeoutMs: number;
  compose: { file: string; project: string | undefined; docker: string } | undefined;
}

const DEFAULT_TIMEOUT_SECONDS = 10;

export function loadDoctorConfig(env: Env, flags: DoctorFlags): DoctorConfig {
  const baseUrl = httpUrl({}, '--base-url', flags.baseUrl.trim());
  if (baseUrl === undefined) throw new ConfigError('--base-url', 'is required');
  return Object.freeze({
    baseUrl,
    services: Object.freeze(services(flags.service)),
    token: flags.token?.trim() || secret(env, 'PLATFORM_TOKEN')?.value.trim(),
    timeoutMs: timeoutSeconds(env) * 1000,
    compose: flags.compose?.trim()
      ? Object.freeze({
          file: composeFile(flags.compose.trim()),
          project: flags.project?.trim() || optionalString(env, 'COMPOSE_PROJECT_NAME'),
          docker: optionalString(env, 'PLATFORM_DOCTOR_DOCKER') ?? 'docker',
        })
      : undefined,
  });
}

function composeFile(path: string): string {
  if (!existsSync(path)) throw new ConfigError('--compose', `no such file: ${path}`);
  return path;
}

function services(flag: string | undefined): string[] {
  if (flag === undefined) return [...TOOL_SERVICES];
  const names = flag
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0) throw new ConfigError('--service', 'names no service');
  for (const n of names) {
    if (!isServiceName(n))
      throw new ConfigError('--service', `"${n}" is not a service name ([a-z][a-z0-9-]*)`);
  }
  return [...new Set(names)];
}

function timeoutSeconds(env: Env): number {
  const v = optionalString(env, 'PLATFORM_DOCTOR_TIMEOUT');
  if (v === undefined) return DEFAULT_TIMEOUT_SECONDS;
  if (!/^\d+(\.\d+)?$/.test(v) || Number(v) <= 0 || Number(v) > 120) {
    throw new ConfigError(
      'PLATFORM_DOCTOR_TIMEOUT',
      `must be a number of seconds between 0 and 120, got "${v}"`,
    );
  }
  return Number(v);
}
