import type { DpopKey } from '../../cli/client/dpop.ts';
import { checkFakeBearer, checkMissingBearer } from './checks/challenge.ts';
import { checkHostGuard, checkOriginGuard } from './checks/guards.ts';
import { checkHealth } from './checks/health.ts';
import { checkIssuer } from './checks/issuer.ts';
import { checkMetadata } from './checks/metadata.ts';
import type { ServiceTarget } from './checks/target.ts';
import { checkToolsList } from './checks/tools-list.ts';
import type { DoctorConfig } from './config.ts';
import type { Probe } from './http.ts';
import { type CheckRow, skip } from './result.ts';

/**
 * Every check the doctor can run from outside, services in parallel, rows in a stable order: per service
 * #2, #3, #4, #5, the Host and Origin guards, #14; then each distinct issuer the metadata named.
 */
export async function runChecks(config: DoctorConfig, probe: Probe, dpop?: DpopKey): Promise<CheckRow[]> {
  const perService = await Promise.all(
    config.services.map(async (service) => {
      const t: ServiceTarget = { baseUrl: config.baseUrl, service, probe, timeoutMs: config.timeoutMs };
      const [health, metadata, missing, fake, host, origin, tools] = await Promise.all([
        checkHealth(t),
        checkMetadata(t),
        checkMissingBearer(t),
        checkFakeBearer(t),
        checkHostGuard(t),
        checkOriginGuard(t),
        checkToolsList(t, config.token, dpop),
      ]);
      return {
        rows: [health, metadata.row, missing, fake, host, origin, tools],
        issuers: metadata.authorizationServers,
      };
    }),
  );
  const rows = perService.flatMap((s) => s.rows);
  const issuers = [...new Set(perService.flatMap((s) => s.issuers))];
  if (issuers.length === 0) {
    rows.push(
      skip({ ref: '-', subject: 'issuer', name: 'discovery metadata' }, 'no issuer known (#3 did not pass)'),
    );
    return rows;
  }
  for (const issuerRows of await Promise.all(issuers.map((i) => checkIssuer(probe, i))))
    rows.push(...issuerRows);
  return rows;
}
