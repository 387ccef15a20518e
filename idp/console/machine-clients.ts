// The machine clients page (docs/console.md § Machine clients): the list (live first), the form that registers
// one, revoke, and a link to each one's audit. Reads and acts through the admin API (GET machine-clients, POST
// clients, POST revoke-client), so the page and `platform admin clients add` / `revoke-client` share one audit.
import { html } from '../pages/html.ts';
import { act, type ConsoleHandler } from './console.ts';
import { consolePage, sendConsolePage } from './layout.ts';

export const MACHINE_CLIENTS_PATH = '/admin/machine-clients';

interface MachineClientItem {
  client_id: string;
  client_name: string;
  email: string;
  services: string[];
  workload_issuer: string | null;
  workload_subject: string | null;
  may_act?: boolean;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  last_issued_at: string | null;
}

const when = (iso: string | null): string => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}` : '—');

/** GET /admin/machine-clients. */
export const machineClientsView: ConsoleHandler = async (r) => {
  const { items } = await r.api<{ items: MachineClientItem[] }>('GET', '/admin/api/machine-clients');
  const csrf = html`<input type="hidden" name="csrf_token" value="${r.csrf}">`;
  const rows = items.map(
    (c) => html`<tr><td>${c.client_name}<br><span class="mono muted">${c.client_id}</span></td>
<td>${c.email}</td><td>${c.services.join(', ')}${c.may_act ? html`<br><span class="badge">may act for users</span>` : html``}</td>
<td class="small">${c.workload_issuer ? html`<span class="mono">${c.workload_issuer}</span><br><span class="mono muted">${c.workload_subject ?? ''}</span>` : html`<span class="muted">key only</span>`}</td>
<td class="nowrap mono">${when(c.created_at)}<br><span class="muted">${c.created_by}</span></td>
<td class="nowrap mono">${when(c.last_issued_at)}</td>
<td>${c.revoked_at ? html`<span class="badge refused">revoked</span><br><span class="small mono muted">${when(c.revoked_at)}</span>` : html`<span class="badge ok">live</span>`}</td>
<td class="num"><a href="/admin/audit?client_id=${encodeURIComponent(c.client_id)}">Audit</a>${
      c.revoked_at
        ? html``
        : html`<form method="post" action="${MACHINE_CLIENTS_PATH}/revoke">${csrf}<input type="hidden" name="client_id" value="${c.client_id}"><button type="submit" class="danger">Revoke</button></form>`
    }</td></tr>`,
  );
  const services = r.ctx.config.services.map(
    (s) => html`<label class="check"><input type="checkbox" name="service_${s}" value="on"> ${s}</label>`,
  );
  const body = html`<section class="card"><h1>Machine clients</h1>
<p class="muted small">Programs that get tokens without a person: <span class="mono">client_credentials</span> signed with their key (private_key_jwt), or a token of a trusted workload issuer. Each acts as its email for its services; revoking one cuts its live tokens at every gateway within a second.</p>
${items.length ? html`<table><thead><tr><th>Client</th><th>Acts as</th><th>Services</th><th>Workload identity</th><th class="nowrap">Registered (UTC)</th><th class="nowrap">Last token (UTC)</th><th>Status</th><th></th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="muted">No machine client is registered.</p>`}
</section>
<section class="card"><h2>Register a machine client</h2>
<form method="post" action="${MACHINE_CLIENTS_PATH}/add" class="stack">${csrf}
<div class="grid2"><div><label for="mc-name">Name</label><input id="mc-name" name="name" required maxlength="200" placeholder="nightly CI"></div>
<div><label for="mc-email">Acts as (email)</label><input id="mc-email" name="email" type="email" required placeholder="ci-bot@example.com"></div></div>
<div><span class="label">Services</span><div class="checks">${services}</div></div>
<div><label for="mc-jwks">Public key set (JWK Set JSON)</label><textarea id="mc-jwks" name="jwks" rows="4" class="mono" placeholder='{"keys": [{"kty": "EC", "crv": "P-256", …}]}'></textarea></div>
<div><label for="mc-jwks-uri">…or its https URL</label><input id="mc-jwks-uri" name="jwks_uri" placeholder="https://ci.example.com/jwks.json"></div>
<div class="grid2"><div><label for="mc-wi">Workload issuer (optional)</label><input id="mc-wi" name="workload_issuer" placeholder="https://token.actions.githubusercontent.com"></div>
<div><label for="mc-ws">Workload subject</label><input id="mc-ws" name="workload_subject" placeholder="repo:acme/app:ref:refs/heads/main"></div></div>
<div><label class="check"><input type="checkbox" name="may_act" value="on"> May act for users: exchange a user’s token for one that names this client as the actor</label></div>
<div class="row"><button type="submit" class="primary">Register</button></div>
</form></section>`;
  sendConsolePage(
    r.x.res,
    200,
    consolePage({
      title: 'Machine clients',
      tab: 'machine-clients',
      email: r.admin.email,
      flash: r.flash,
      body,
    }),
  );
};

/** POST /admin/machine-clients/add → POST /admin/api/clients. */
export const addMachineClientAction: ConsoleHandler = (r) =>
  act(r, MACHINE_CLIENTS_PATH, async () => {
    const f = r.form;
    const text = (k: string) => {
      const v = f.get(k)?.trim();
      return v ? v : undefined;
    };
    let jwks: unknown;
    const jwksText = text('jwks');
    if (jwksText !== undefined) {
      try {
        jwks = JSON.parse(jwksText);
      } catch {
        jwks = jwksText; // the admin API answers "jwks must be a JWK Set"
      }
    }
    const out = await r.api<{ client_id: string; client_name: string }>('POST', '/admin/api/clients', {
      body: {
        name: f.get('name') ?? '',
        email: f.get('email') ?? '',
        services: r.ctx.config.services.filter((s) => f.get(`service_${s}`) === 'on'),
        ...(jwks !== undefined ? { jwks } : {}),
        ...(text('jwks_uri') !== undefined ? { jwks_uri: text('jwks_uri') } : {}),
        ...(text('workload_issuer') !== undefined ? { workload_issuer: text('workload_issuer') } : {}),
        ...(text('workload_subject') !== undefined ? { workload_subject: text('workload_subject') } : {}),
        ...(f.get('may_act') === 'on' ? { may_act: true } : {}),
      },
    });
    return `Registered machine client ${out.client_name}: its client_id is ${out.client_id}.`;
  });

/** POST /admin/machine-clients/revoke (client_id) → POST /admin/api/revoke-client. */
export const revokeMachineClientAction: ConsoleHandler = (r) =>
  act(r, MACHINE_CLIENTS_PATH, async () => {
    const clientId = r.form.get('client_id') ?? '';
    await r.api('POST', '/admin/api/revoke-client', { body: { client_id: clientId } });
    return `Revoked machine client ${clientId}: no new token, and its live tokens are refused.`;
  });
