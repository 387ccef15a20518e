import {
  checkAlias,
  checkBootLogs,
  checkDatabaseUrl,
  checkHealthy,
  checkJwksFetch,
  checkProxyUpstream,
  checkTunnelIngress,
} from './checks/containers.ts';
import { checkSettingsReach } from './checks/settings.ts';
import { type ComposeTarget, toolServices } from './compose.ts';
import { type CheckRow, skip } from './result.ts';

/**
 * The container and file checks, after the HTTP ones (so #7 sees the key-set fetch #14's call caused): #1 per
 * service, #6/#16 and #8/#15 per tool server, #8 for the proxy's hops, #9, #10 per service, #7.
 */
export async function runContainerChecks(
  t: ComposeTarget,
  o: { baseUrl: string; services: readonly string[]; authenticatedCallMade: boolean },
): Promise<CheckRow[]> {
  const rows: CheckRow[] = [];
  // Services of a profile with no container: the profile is off (e.g. the tunnel on a host without one).
  const off = new Map<string, string>();
  for (const s of t.services.values()) {
    if (s.profiles && s.profiles.length > 0 && (await t.containers(s.name)).length === 0)
      off.set(s.name, `profile ${s.profiles.join(', ')} not running (COMPOSE_PROFILES)`);
  }
  for (const s of t.services.values()) {
    if (s.name === 'migrate') continue;
    const reason = off.get(s.name);
    rows.push(
      reason
        ? skip({ ref: '#1', subject: s.name, name: 'container healthy' }, reason)
        : await checkHealthy(t, s.name),
    );
  }
  const tools = toolServices(t).filter((x) => o.services.includes(x.tool));
  for (const tool of tools) {
    rows.push(...(await checkBootLogs(t, tool.service)));
    rows.push(await checkAlias(t, 'gateway', tool.alias, tool.tool));
    rows.push(await checkDatabaseUrl(t, tool.service));
  }
  if (t.services.has('idp')) rows.push(await checkDatabaseUrl(t, 'idp'));
  if (t.services.has('proxy')) {
    rows.push(await checkAlias(t, 'proxy', 'gateway', 'proxy'));
    rows.push(await checkProxyUpstream(t));
  }
  rows.push(...checkTunnelIngress(t, o.baseUrl, o.services, off.get('tunnel')));
  rows.push(await checkJwksFetch(t, o.authenticatedCallMade));
  rows.push(...(await checkSettingsReach(t)));
  return rows;
}
