// The console's pages and form actions. Each reads and acts only through admin API routes (r.api), so the
// console and `platform admin` share one implementation and one audit.

import { type Html, html } from '../pages/html.ts';
import type { AuditItem } from '../store/audit.ts';
import { perHourChart } from './chart.ts';
import { type ConsoleHandler, ConsoleProblem, type ConsoleRequest } from './console.ts';
import { consolePage, sendConsolePage } from './layout.ts';
import { userPath } from './user-actions.ts';

const FILTERS = ['email', 'client_id', 'service', 'since', 'until'] as const;
const LOCAL_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/;

export const when = (iso: string | null | undefined): string =>
  iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}` : '—';

export function show(
  r: ConsoleRequest,
  title: string,
  tab: 'audit' | 'users' | 'clients' | 'keys',
  body: Html,
): void {
  sendConsolePage(r.x.res, 200, consolePage({ title, tab, email: r.admin.email, flash: r.flash, body }));
}

export const csrfField = (r: ConsoleRequest) =>
  html`<input type="hidden" name="csrf_token" value="${r.csrf}">`;

/** The audit filter as the admin API takes it: the console's form times are UTC without a zone. */
function auditQuery(url: URL): { api: URLSearchParams; shown: Record<string, string> } {
  const api = new URLSearchParams();
  const shown: Record<string, string> = {};
  for (const k of FILTERS) {
    const v = url.searchParams.get(k)?.trim();
    if (!v) continue;
    shown[k] = v;
    api.set(k, (k === 'since' || k === 'until') && LOCAL_TIME.test(v) ? `${v}Z` : v);
  }
  return { api, shown };
}

function withQuery(path: string, q: URLSearchParams): string {
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

const eventBadge = (e: string) =>
  e === 'issued'
    ? html`<span class="badge issued">issued</span>`
    : e === 'refused'
      ? html`<span class="badge refused">refused</span>`
      : html`<span class="badge admin">${e}</span>`;

function detailCell(i: AuditItem): Html {
  if (i.event === 'issued') {
    const services = (i.scope ?? '')
      .split(' ')
      .filter((s) => s.startsWith('mcp:'))
      .map((s) => s.slice(4));
    const via = typeof i.detail?.assertion_issuer === 'string' ? i.detail.assertion_issuer : undefined;
    const connection = typeof i.detail?.connection === 'string' ? i.detail.connection : undefined;
    const from = typeof i.detail?.subject_jti === 'string' ? i.detail.subject_jti : undefined;
    const what = connection
      ? html`connection <span class="mono">${connection}</span>`
      : html`${services.length ? services.join(', ') : 'no service'}`;
    return html`${i.grant_type ?? ''} <span class="muted small">· ${what}${via ? html` · vouched for by <span class="mono">${via}</span>` : html``}${from ? html` · exchanged from <span class="mono">${from}</span>` : html``}</span>`;
  }
  if (i.event === 'refused') {
    const d = i.detail as { source?: string; reason?: string } | null;
    return html`<span class="mono">${i.target ?? ''}</span> <span class="muted small">· ${d?.source ?? ''}: ${d?.reason ?? ''}</span>`;
  }
  return html`${i.target ? html`<span class="mono">${i.target}</span>` : html`<span class="muted">—</span>`}`;
}

/** GET /admin/audit: filters, the per-hour chart, one page of the feed, paging and the export links. */
export const auditView: ConsoleHandler = async (r) => {
  const { api, shown } = auditQuery(r.x.url);
  const cursor = r.x.url.searchParams.get('cursor') ?? undefined;
  const pageQuery = new URLSearchParams(api);
  pageQuery.set('limit', '50');
  if (cursor) pageQuery.set('cursor', cursor);
  const [page, perHour] = await Promise.all([
    r.api<{ items: AuditItem[]; next_cursor: string | null }>('GET', '/admin/api/audit', {
      query: pageQuery,
    }),
    r.api<{ hours: Array<{ hour: string; issued: number; refused: number }> }>(
      'GET',
      '/admin/api/audit/per-hour',
      {
        query: { hours: '48' },
      },
    ),
  ]);
  const own = new URLSearchParams(shown);
  const older = page.next_cursor ? new URLSearchParams([...own, ['cursor', page.next_cursor]]) : undefined;
  const services = r.ctx.config.services;
  const totals = perHour.hours.reduce(
    (t, h) => ({ issued: t.issued + h.issued, refused: t.refused + h.refused }),
    {
      issued: 0,
      refused: 0,
    },
  );
  const rows = page.items.map(
    (i) => html`<tr><td class="nowrap mono">${when(i.at)}</td><td>${eventBadge(i.event)}</td>
<td>${i.email ? html`<a href="${userPath(i.email)}">${i.email}</a>` : html`<span class="muted">unknown</span>`}</td>
<td class="mono">${i.client_id ?? '—'}</td><td>${detailCell(i)}</td></tr>`,
  );
  show(
    r,
    'Audit',
    'audit',
    html`<section class="card"><h1>Issuances and refusals per hour</h1>
<div class="legend"><span><span class="key issued"></span>issued (${String(totals.issued)} in 48 h)</span><span><span class="key refused"></span>refused (${String(totals.refused)})</span><span>all users and clients, times in UTC</span></div>
${perHourChart(perHour.hours)}</section>
<section class="card"><h2>Audit</h2>
<form method="get" action="/admin/audit"><div class="filters">
<div><label for="f-email">User email</label><input id="f-email" name="email" value="${shown.email ?? ''}" placeholder="anyone"></div>
<div><label for="f-client">Client id</label><input id="f-client" name="client_id" value="${shown.client_id ?? ''}" placeholder="any client"></div>
<div><label for="f-service">Service</label><select id="f-service" name="service"><option value="">any service</option>${services.map(
      (s) => html`<option value="${s}"${shown.service === s ? html` selected` : html``}>${s}</option>`,
    )}</select></div>
<div><label for="f-since">Since (UTC)</label><input id="f-since" name="since" type="datetime-local" value="${shown.since ?? ''}"></div>
<div><label for="f-until">Until (UTC)</label><input id="f-until" name="until" type="datetime-local" value="${shown.until ?? ''}"></div>
</div>
<div class="row"><button type="submit" class="primary">Filter</button><a class="button" href="/admin/audit">Clear</a><span class="spacer"></span>
<span class="muted small">Export this filter:</span><a class="button" href="${withQuery('/admin/audit.jsonl', own)}">JSON lines</a><a class="button" href="${withQuery('/admin/audit.csv', own)}">CSV</a></div>
</form></section>
<section class="card"><table><thead><tr><th class="nowrap">Time (UTC)</th><th>Event</th><th>User or administrator</th><th>Client</th><th>Detail</th></tr></thead>
<tbody>${rows.length ? rows : [html`<tr><td colspan="5" class="muted">No audit rows match.</td></tr>`]}</tbody></table>
<div class="pager">${cursor ? html`<a class="button" href="${withQuery('/admin/audit', own)}">← Newest</a>` : html``}
${older ? html`<a class="button" href="${withQuery('/admin/audit', older)}">Older →</a>` : html`<span class="muted small">End of the audit for this filter.</span>`}
<span class="spacer"></span><span class="muted small">${String(page.items.length)} rows on this page</span></div></section>`,
  );
};

/** GET /admin/audit.jsonl and .csv: the admin API's export of the same filter, streamed as a download. */
export function auditExportView(format: 'jsonl' | 'csv'): ConsoleHandler {
  return async (r) => {
    const { api } = auditQuery(r.x.url);
    for (const k of r.x.url.searchParams.keys())
      if (!(FILTERS as readonly string[]).includes(k))
        throw new ConsoleProblem(400, `unknown parameter ${k}`);
    await r.stream(`/admin/api/audit.${format}`, api);
  };
}

/** GET /admin/users?email=<part>: the search; an exact match goes straight to the user's page. */
export const usersView: ConsoleHandler = async (r) => {
  const part = r.x.url.searchParams.get('email')?.trim().toLowerCase() ?? '';
  let results: Html = html`<p class="muted">Type part of an email address in the box above.</p>`;
  if (part !== '') {
    const found = await r.api<{ items: Array<{ email: string }> }>('GET', '/admin/api/users', {
      query: { email: part },
    });
    if (found.items.length === 1 || found.items[0]?.email === part) {
      const to = found.items[0]!.email;
      r.x.res.writeHead(303, { location: userPath(to), 'cache-control': 'no-store', 'content-length': 0 });
      r.x.res.end();
      return;
    }
    results = found.items.length
      ? html`<table><thead><tr><th>Email</th></tr></thead><tbody>${found.items.map(
          (u) => html`<tr><td><a href="${userPath(u.email)}">${u.email}</a></td></tr>`,
        )}</tbody></table>`
      : html`<p class="muted">No user's email contains “${part}”.</p>`;
  }
  show(
    r,
    'Users',
    'users',
    html`<section class="card"><h1>Find a user</h1>
<form method="get" action="/admin/users" class="row"><input name="email" value="${part}" placeholder="part of an email address" aria-label="Email"><button type="submit" class="primary">Find</button></form></section>
<section class="card">${results}</section>`,
  );
};

interface UserBody {
  email: string;
  blocked: { blocked_by: string; blocked_at: string } | null;
  subjects: string[];
  sign_ins: Array<{ id: string; client_id: string; created_at: string; last_used_at: string }>;
  consents: Array<{
    client_id: string;
    client_name: string;
    services: string[];
    scopes: string[];
    granted_at: string;
  }>;
}
interface EntitlementsBody {
  mode: 'open' | 'managed';
  roles: string[];
  services: string[];
  grants: Array<{
    service: string;
    email: string | null;
    role: string | null;
    granted_by: string;
    granted_at: string;
  }>;
  entities: Array<{
    entity: string;
    permission: string;
    email: string | null;
    role: string | null;
    granted_by: string;
    granted_at: string;
  }>;
  ent_max: number;
}

/** GET /admin/users/:email: entitlements, live sign-ins, consents, with their actions. */
export const userView: ConsoleHandler = async (r) => {
  const email = r.params.email ?? '';
  const user = await r.api<UserBody>('GET', `/admin/api/users/${encodeURIComponent(email)}`);
  const ent = await r.api<EntitlementsBody>('GET', '/admin/api/entitlements', {
    query: { email: user.email },
  });
  const base = userPath(user.email);
  const form = (action: string, fields: Html, button: Html) =>
    html`<form method="post" action="${base}/${action}">${csrfField(r)}${fields}${button}</form>`;

  let entitlements: Html;
  if (ent.mode === 'open') {
    entitlements = html`<p>Entitlements are <strong>open</strong> (<code>PLATFORM_ENTITLEMENTS=open</code>): every user gets every service (${r.ctx.config.services.join(', ')}). Set it to <code>managed</code> to grant services one by one.</p>`;
  } else {
    const rows = r.ctx.config.services.map((s) => {
      const direct = ent.grants.find((g) => g.service === s && g.email !== null);
      const viaRoles = ent.grants.filter((g) => g.service === s && g.role !== null).map((g) => g.role!);
      const has = ent.services.includes(s);
      const how: Html = direct
        ? html`granted to the email by ${direct.granted_by}, ${when(direct.granted_at)}`
        : viaRoles.length
          ? html`through role ${viaRoles.join(', ')}`
          : html`<span class="muted">not granted</span>`;
      const button = direct
        ? form(
            'ungrant',
            html`<input type="hidden" name="service" value="${s}">`,
            html`<button type="submit" class="danger">Ungrant</button>`,
          )
        : form(
            'grant',
            html`<input type="hidden" name="service" value="${s}">`,
            html`<button type="submit">Grant</button>`,
          );
      return html`<tr><td><strong>${s}</strong><br><span class="mono muted">mcp:${s}</span></td><td>${has ? html`<span class="badge ok">entitled</span>` : html`<span class="badge">no</span>`}</td><td>${how}</td><td class="num">${button}</td></tr>`;
    });
    entitlements = html`<p class="muted small">Managed entitlements. Roles of this user: ${ent.roles.length ? ent.roles.join(', ') : 'none'}. Ungranting cuts the user's live tokens for the service.</p>
<table><thead><tr><th>Service</th><th>Access</th><th>How</th><th class="num">Action</th></tr></thead><tbody>${rows}</tbody></table>`;
  }

  // Entity grants (docs/admin.md § Entity grants): to this email or to a role, ungranted per row.
  const entityRows = ent.entities.map((e) => {
    const to = e.role !== null ? html`<input type="hidden" name="role" value="${e.role}">` : html``;
    const ungrant = form(
      'entity-ungrant',
      html`<input type="hidden" name="entity" value="${e.entity}"><input type="hidden" name="permission" value="${e.permission}">${to}`,
      html`<button type="submit" class="danger">${e.role !== null ? `Ungrant from role ${e.role}` : 'Ungrant'}</button>`,
    );
    return html`<tr><td class="mono">${e.entity}</td><td>${e.permission}</td><td>${e.role !== null ? html`through role ${e.role}` : html`to the email`}, by ${e.granted_by}</td><td class="nowrap mono">${when(e.granted_at)}</td><td class="num">${ungrant}</td></tr>`;
  });
  const entityTable = ent.entities.length
    ? html`<table><thead><tr><th>Entity</th><th>Permission</th><th>How</th><th class="nowrap">Granted (UTC)</th><th class="num">Action</th></tr></thead><tbody>${entityRows}</tbody></table>`
    : html`<p class="muted">No entity grants.</p>`;
  const entities = html`<p class="muted small">Carried in the token's <code>ent</code> claim (at most ${String(ent.ent_max)} entities; beyond: <code>ent_overflow</code>, refused by services that enforce them). Ungranting cuts the live tokens of the users concerned.</p>
${entityTable}
<form method="post" action="${base}/entity-grant" class="filters entity-grant">${csrfField(r)}
<div><label for="ent-entity">Entity</label><input id="ent-entity" name="entity" required maxlength="200" placeholder="deal:4711"></div>
<div><label for="ent-permission">Permission</label><select id="ent-permission" name="permission"><option value="read">read</option><option value="write">write</option></select></div>
<div><label for="ent-role">To role (empty: this email)</label><input id="ent-role" name="role" maxlength="200" placeholder="deal-team"></div>
<div><button type="submit">Grant entity</button></div></form>`;

  const signIns = user.sign_ins.length
    ? html`<table><thead><tr><th>Client</th><th class="nowrap">Signed in (UTC)</th><th class="nowrap">Last used (UTC)</th><th class="num">Action</th></tr></thead><tbody>${user.sign_ins.map(
        (
          s,
        ) => html`<tr><td class="mono">${s.client_id}</td><td class="nowrap mono">${when(s.created_at)}</td><td class="nowrap mono">${when(s.last_used_at)}</td>
<td class="num">${form(`sign-ins/${s.id}/revoke`, html``, html`<button type="submit" class="danger">Revoke</button>`)}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="muted">No live sign-ins.</p>`;
  const consents = user.consents.length
    ? html`<table><thead><tr><th>Client</th><th>Services</th><th class="nowrap">Granted (UTC)</th><th class="num">Action</th></tr></thead><tbody>${user.consents.map(
        (
          c,
        ) => html`<tr><td>${c.client_name || 'unnamed'}<br><span class="mono muted">${c.client_id}</span></td><td>${[...c.services, ...c.scopes].join(', ') || '—'}</td><td class="nowrap mono">${when(c.granted_at)}</td>
<td class="num">${form('consents/withdraw', html`<input type="hidden" name="client_id" value="${c.client_id}">`, html`<button type="submit" class="danger">Withdraw</button>`)}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="muted">No consents.</p>`;

  // Connections (docs/connections.md): listed and disconnected, never a token.
  let connections = html``;
  if (r.ctx.connections) {
    const conn = await r.api<{
      connections: Array<{
        name: string;
        display_name: string;
        connected: boolean;
        connected_at: string | null;
        upstream_subject: string | null;
        scopes: string[];
        expires_at: string | null;
      }>;
    }>('GET', '/admin/api/connections', { query: { email: user.email } });
    const rows = conn.connections.map(
      (c) => html`<tr><td><strong>${c.display_name}</strong><br><span class="mono muted">${c.name}</span></td>
<td>${c.connected ? html`<span class="badge ok">connected</span>` : html`<span class="badge">not connected</span>`}</td><td class="mono">${c.upstream_subject ?? '—'}</td><td class="small mono">${c.scopes.join(' ') || '—'}</td>
<td class="nowrap mono">${when(c.connected_at)}</td><td class="nowrap mono">${when(c.expires_at)}</td>
<td class="num">${c.connected ? form('connections/disconnect', html`<input type="hidden" name="connection" value="${c.name}">`, html`<button type="submit" class="danger">Disconnect</button>`) : html``}</td></tr>`,
    );
    connections = html`<section class="card"><h2>Connections</h2>
<p class="muted small">The user's own access to systems behind the tools. Disconnecting drops the stored grant and revokes it at the upstream when it can.</p>
<table><thead><tr><th>Connection</th><th>State</th><th>Upstream subject</th><th>Scopes</th><th class="nowrap">Connected (UTC)</th><th class="nowrap">Expires (UTC)</th><th class="num">Action</th></tr></thead><tbody>${rows}</tbody></table></section>`;
  }

  show(
    r,
    user.email,
    'users',
    html`<section class="card"><div class="row"><h1>${user.email}</h1><span class="spacer"></span>
<a class="button" href="/admin/audit?${new URLSearchParams({ email: user.email }).toString()}">Audit of this user</a>
${form('revoke-all', html``, html`<button type="submit" class="danger strong">Revoke all sign-ins and tokens</button>`)}
${user.blocked ? form('unblock', html``, html`<button type="submit">Unblock</button>`) : form('block', html``, html`<button type="submit" class="danger strong">Block</button>`)}</div>
${user.blocked ? html`<p><span class="badge">blocked</span> by ${user.blocked.blocked_by}, ${when(user.blocked.blocked_at)}: no sign-in, refresh or device approval until unblocked.</p>` : html``}
<p class="muted small">Subjects: ${user.subjects.length ? user.subjects.join(', ') : 'none yet'}. “Revoke all” cuts every token issued to this email so far and ends every sign-in; “Block” does the same and refuses every new one until “Unblock”.</p></section>
<section class="card"><h2>Entitlements</h2>${entitlements}</section>
<section class="card"><h2>Entity grants</h2>${entities}</section>
<section class="card"><h2>Active sign-ins</h2>${signIns}</section>
<section class="card"><h2>Consents</h2>${consents}</section>
${connections}`,
  );
};

/** GET /admin/clients. */
export const clientsView: ConsoleHandler = async (r) => {
  const { items } = await r.api<{
    items: Array<{
      client_id: string;
      client_name: string | null;
      kind: string;
      redirect_uris: string[] | null;
      created_at: string | null;
      consents: number;
    }>;
  }>('GET', '/admin/api/clients');
  const rows = items.map(
    (
      c,
    ) => html`<tr><td>${c.client_name ?? html`<span class="muted">(document fetched when used)</span>`}<br><span class="mono muted">${c.client_id}</span></td>
<td><span class="badge">${c.kind}</span></td><td class="small">${c.redirect_uris ? c.redirect_uris.map((u) => html`<span class="mono">${u}</span><br>`) : html`<span class="muted">from its metadata document</span>`}</td>
<td class="nowrap mono">${when(c.created_at)}</td><td class="num">${String(c.consents)}</td></tr>`,
  );
  show(
    r,
    'Clients',
    'clients',
    html`<section class="card"><h1>Clients</h1>
<p class="muted small">Built-in and registered clients, then clients known by their metadata document (their client id is the document's URL) through a user's consent.</p>
<table><thead><tr><th>Client</th><th>Kind</th><th>Redirect URIs</th><th class="nowrap">Registered (UTC)</th><th class="num">Consents</th></tr></thead><tbody>${rows}</tbody></table></section>`,
  );
};

/** GET /admin: the landing page is the audit. */
export const homeView: ConsoleHandler = async (r) => {
  r.x.res.writeHead(303, { location: '/admin/audit', 'cache-control': 'no-store', 'content-length': 0 });
  r.x.res.end();
};
