import { processEnv } from '../cli/config.ts';
import { type DoctorFlags, loadDoctorConfig } from './doctor/config.ts';
import { createProber } from './doctor/http.ts';
import { formatRows, formatSummary } from './doctor/report.ts';
import { anyFailed } from './doctor/result.ts';
import { runChecks } from './doctor/run.ts';

// Spec checks no HTTP request from outside can decide; docs/deploy.md says which command checks each.
const BY_HAND = 'checks #1, #6-#13 and #15-#21 are not visible from outside: see docs/deploy.md';

/**
 * `platform doctor --base-url URL [--service S]`: the resource-server contract's operational acceptance checks
 * that can be run from outside, one row per check on stdout. Resolves with the exit code: 0 when no row
 * failed, 1 otherwise. A bad flag or variable throws ConfigError (exit 2, before any request).
 */
export async function doctor(flags: DoctorFlags): Promise<number> {
  const config = loadDoctorConfig(processEnv(), flags);
  const prober = createProber({ timeoutMs: config.timeoutMs });
  process.stdout.write(`platform doctor: ${config.baseUrl} (services: ${config.services.join(', ')})\n`);
  try {
    const rows = await runChecks(config, prober.probe);
    process.stdout.write(`${formatRows(rows)}\n${formatSummary(rows)}; ${BY_HAND}\n`);
    return anyFailed(rows) ? 1 : 0;
  } finally {
    await prober.close();
  }
}
