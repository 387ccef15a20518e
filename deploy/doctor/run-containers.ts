import {
  checkAlias,
  checkBootLogs,
  checkDatabaseUrl,
  checkHealthy,
  checkJwksFetch,
  checkProxyUpstream,
  checkTunnelIngress,
} from './checks/containers.ts';
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
  for (const s of t.services.values()) {
    if (s.name === 'migrate') continue;
    const profiles = (s as { profiles?: string[] }).profiles;
    if (profiles && (await t.containers(s.name)).length === 0) {
      rows.push(
        skip(
          { ref: '#1', subject: s.name, name: 'container healthy' },
          `profile ${profiles.join(', ')} not running`,
        ),
      );
      continue;
    }
    rows.push(await checkHealthy(t, s.name));
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
  rows.push(...checkTunnelIngress(t, o.baseUrl, o.services));
  rows.push(await checkJwksFetch(t, o.authenticatedCallMade));
  return rows;
}
