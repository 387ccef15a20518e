import { processIo } from '../cli/client/io.ts';
import { loadClientConfig, processEnv } from '../cli/config.ts';
import { presentedToken } from '../cli/token.ts';
import { openCompose } from './doctor/compose.ts';
import { type DoctorFlags, loadDoctorConfig } from './doctor/config.ts';
import { createProber } from './doctor/http.ts';
import { formatRows, formatSummary } from './doctor/report.ts';
import { anyFailed } from './doctor/result.ts';
import { runChecks } from './doctor/run.ts';
import { runContainerChecks } from './doctor/run-containers.ts';

// Spec checks the doctor cannot decide; docs/deploy.md says which command checks each.
const BY_HAND_HTTP_ONLY =
  'checks #1, #6-#13 and #15-#21 need the containers (--compose) or are checked elsewhere: see docs/deploy.md';
const BY_HAND_WITH_COMPOSE =
  'checks #11-#13 (Entra registration, vault) and #17-#21 (write tools) are checked elsewhere: see docs/deploy.md';

/**
 * `platform doctor --base-url URL [--service S] [--compose FILE [--project P]]`: the resource-server contract's
 * operational acceptance checks, one row per check on stdout — from outside (HTTP) always, and with a compose
 * file also those that need the containers, their logs and the tunnel's file. Resolves with the exit code: 0
 * when no row failed, 1 otherwise. A bad flag or variable throws ConfigError (exit 2, before any request).
 */
export async function doctor(flags: DoctorFlags): Promise<number> {
  const env = processEnv();
  const config = loadDoctorConfig(env, flags);
  const compose = config.compose && openCompose({ ...config.compose, timeoutMs: 30_000, env });
  const prober = createProber({ timeoutMs: config.timeoutMs });
  process.stdout.write(
    `platform doctor: ${config.baseUrl} (services: ${config.services.join(', ')})${compose ? `; compose project ${compose.project}` : ''}\n`,
  );
  try {
    // The stored login's DPoP key when the token is bound to it (`PLATFORM_TOKEN=$(platform token)` after a
    // `platform login`); else the token goes as Bearer.
    const dpop = config.token
      ? (await presentedToken(loadClientConfig(env, { token: config.token }), processIo)).dpop
      : undefined;
    const rows = await runChecks(config, prober.probe, dpop);
    if (compose) {
      rows.push(
        ...(await runContainerChecks(compose, {
          baseUrl: config.baseUrl,
          services: config.services,
          authenticatedCallMade: config.token !== undefined,
        })),
      );
    }
    const byHand = compose ? BY_HAND_WITH_COMPOSE : BY_HAND_HTTP_ONLY;
    process.stdout.write(`${formatRows(rows)}\n${formatSummary(rows)}; ${byHand}\n`);
    return anyFailed(rows) ? 1 : 0;
  } finally {
    await prober.close();
  }
}
