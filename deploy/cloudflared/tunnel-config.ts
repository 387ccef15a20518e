// The cloudflared ingress for one public host (spec check #10: the tunnel lists the host and, per service, the
// two path rules `/<SERVICE>/mcp` and `/<SERVICE>/.well-known/oauth-protected-resource`). cloudflared does
// not expand variables in its config file, so the file is rendered from these options instead of templated.

export interface TunnelOptions {
  /** The public host name, e.g. `app.example.com` (no scheme). */
  host: string;
  /** The named tunnel's UUID (`cloudflared tunnel create` prints it). */
  tunnelId: string;
  services: readonly string[];
  /** Where the tunnel reaches the reverse proxy, from the tunnel container. */
  proxyUrl: string;
  /** The web application's origin for every other path of the host (shared-host layout); absent: 404. */
  webAppUrl?: string;
}

export interface IngressRule {
  hostname?: string;
  path?: string;
  service: string;
  /** A comment line rendered above the rule. */
  note?: string;
}

const HOST = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SERVICE = /^[a-z][a-z0-9-]{0,31}$/;

/** The rules in the order cloudflared tries them (first match wins); the last one catches everything. */
export function ingressRules(o: TunnelOptions): IngressRule[] {
  checkOptions(o);
  const rule = (path: string, note?: string): IngressRule => ({
    hostname: o.host,
    path,
    service: o.proxyUrl,
    ...(note ? { note } : {}),
  });
  const rules: IngressRule[] = [];
  for (const s of o.services) {
    // Anchored at both ends: `/platform/mcp` must not also open `/platform/mcp-admin` or `/platformx/mcp`.
    rules.push(
      rule(`^/${s}/mcp$`, `${s}: the MCP endpoint and its protected-resource metadata (spec check #10)`),
    );
    rules.push(rule(`^/${s}/\\.well-known/oauth-protected-resource$`));
    rules.push(rule(`^/${s}/health$`, `${s}: liveness under the public host (spec check #2)`));
    // RFC 9728 §3.1 path-inserted location, which MCP clients try before the WWW-Authenticate hint.
    rules.push(rule(`^/\\.well-known/oauth-protected-resource/${s}(/mcp)?$`));
  }
  rules.push(
    rule(
      '^/oauth/(authorize|token|register|revoke|userinfo|device_authorization|device)$',
      'the OpenID Connect provider (docs/reference.md), with the device verification page',
    ),
  );
  // The admin API (/admin/api/…) and the console's pages (/admin, /admin/…), both served by the IdP.
  rules.push(rule('^/admin(/.*)?$', 'administration: the admin API and the console (docs/console.md)'));
  rules.push(rule('^/\\.well-known/(openid-configuration|oauth-authorization-server|jwks\\.json)$'));
  if (o.webAppUrl !== undefined) {
    rules.push({
      hostname: o.host,
      service: o.webAppUrl,
      note: 'every other path of the host: the web application',
    });
  }
  rules.push({
    service: 'http_status:404',
    note: 'cloudflared requires a last rule that matches everything',
  });
  return rules;
}

export function renderTunnelConfig(o: TunnelOptions): string {
  const lines = [
    '# Rendered by deploy/cloudflared/render-config.ts: re-render rather than edit (docs/deploy.md § Tunnel).',
    `tunnel: ${o.tunnelId}`,
    'credentials-file: /etc/cloudflared/credentials.json',
    'ingress:',
  ];
  for (const r of ingressRules(o)) {
    if (r.note) lines.push(`  # ${r.note}`);
    const fields: Array<[string, string | undefined]> = [
      ['hostname', r.hostname],
      ['path', r.path],
      ['service', r.service],
    ];
    const present = fields.filter((f): f is [string, string] => f[1] !== undefined);
    present.forEach(([k, v], i) => {
      lines.push(`${i === 0 ? '  - ' : '    '}${k}: ${quote(v)}`);
    });
  }
  return `${lines.join('\n')}\n`;
}

// Single-quoted YAML scalars take every character literally except the quote itself (doubled).
function quote(v: string): string {
  return /^[A-Za-z0-9_.:/-]+$/.test(v) ? v : `'${v.replace(/'/g, "''")}'`;
}

function checkOptions(o: TunnelOptions): void {
  if (!HOST.test(o.host))
    throw new TypeError(`--host: "${o.host}" is not a host name (e.g. app.example.com)`);
  if (!UUID.test(o.tunnelId)) throw new TypeError(`--tunnel-id: "${o.tunnelId}" is not a tunnel UUID`);
  if (o.services.length === 0) throw new TypeError('--services: names no service');
  for (const s of o.services) {
    if (!SERVICE.test(s)) throw new TypeError(`--services: "${s}" is not a service name`);
  }
  for (const [flag, url] of [
    ['--proxy', o.proxyUrl],
    ['--web-app', o.webAppUrl],
  ] as const) {
    if (url !== undefined && !/^https?:\/\/[^/\s]+$/.test(url)) {
      throw new TypeError(`${flag}: "${url}" must be an http(s) origin such as http://proxy:81`);
    }
  }
}
