// The console's signing-keys page (docs/console.md): the keys and their states, and, with
// PLATFORM_KEY_ROTATION=auto, the planned and emergency rotations, each one call of the admin API.
import { InvalidRequestError } from '../errors.ts';
import { type Html, html } from '../pages/html.ts';
import { act, type ConsoleHandler } from './console.ts';
import { csrfField, show, when } from './pages.ts';

interface KeyItem {
  kid: string;
  state: string;
  origin: string;
  published_since: string | null;
  activated_at: string | null;
  retired_at: string | null;
  unpublish_at: string | null;
  withdrawn_at: string | null;
}

const KEYS_PATH = '/admin/keys';

const STATE_BADGE: Readonly<Record<string, Html>> = {
  current: html`<span class="badge ok">signs tokens</span>`,
  next: html`<span class="badge issued">next: published, signs later</span>`,
  previous: html`<span class="badge">retired: published until its tokens expire</span>`,
  expired: html`<span class="badge">expired: unpublished</span>`,
  withdrawn: html`<span class="badge refused">withdrawn</span>`,
  scheduled: html`<span class="badge">scheduled</span>`,
};

/** GET /admin/keys. */
export const keysView: ConsoleHandler = async (r) => {
  const { rotation, items } = await r.api<{ rotation: 'auto' | 'off'; items: KeyItem[] }>(
    'GET',
    '/admin/api/keys',
  );
  const rows = items.map(
    (
      k,
    ) => html`<tr><td class="mono">${k.kid}</td><td>${STATE_BADGE[k.state] ?? k.state}</td><td>${k.origin}</td>
<td class="nowrap mono">${when(k.published_since)}</td><td class="nowrap mono">${when(k.activated_at)}</td>
<td class="nowrap mono">${when(k.retired_at ?? k.withdrawn_at)}</td><td class="nowrap mono">${when(k.unpublish_at)}</td></tr>`,
  );
  const form = (action: string, fields: Html, button: Html) =>
    html`<form method="post" action="${KEYS_PATH}/${action}">${csrfField(r)}${fields}${button}</form>`;
  const actions =
    rotation === 'auto'
      ? html`<div class="grid2"><div><h2>Planned rotation</h2><p class="muted small">A next key is published now and signs after the publish-ahead margin; tokens of the current key keep working until they expire.</p>
${form('rotate', html``, html`<button type="submit">Rotate</button>`)}</div>
<div><h2>Emergency rotation</h2><p class="muted small">A new key signs at once; every other key is withdrawn: tokens they signed are refused at every gateway within seconds, and clients must refresh.</p>
${form('rotate-emergency', html`<p class="small"><label><input type="checkbox" name="confirm" value="yes" required> Refuse every token signed so far</label></p>`, html`<button type="submit" class="danger strong">Withdraw and switch now</button>`)}</div></div>`
      : html`<p class="muted small">Static keys (<code>PLATFORM_OIDC_PRIVATE_KEY</code>, in configuration order: the first signs). Set <code>PLATFORM_KEY_ROTATION=auto</code> to rotate them from here.</p>`;
  show(
    r,
    'Signing keys',
    'keys',
    html`<section class="card"><h1>Signing keys</h1>
<p class="muted small">The keys behind <span class="mono">/.well-known/jwks.json</span>: a key is published before it signs and stays published until every token it signed has expired.</p>
<table><thead><tr><th>Key id (kid)</th><th>State</th><th>Origin</th><th class="nowrap">Published (UTC)</th><th class="nowrap">Signs from (UTC)</th><th class="nowrap">Retired / withdrawn (UTC)</th><th class="nowrap">Unpublished (UTC)</th></tr></thead><tbody>${rows}</tbody></table></section>
<section class="card">${actions}</section>`,
  );
};

/** POST /admin/keys/rotate and /rotate-emergency (confirm=yes) → POST /admin/api/keys/rotate. */
export function rotateAction(emergency: boolean): ConsoleHandler {
  return (r) =>
    act(r, KEYS_PATH, async () => {
      if (emergency && r.form.get('confirm') !== 'yes')
        throw new InvalidRequestError('tick the box to confirm the emergency rotation');
      const out = await r.api<{ kid: string; created: boolean; activate_at: string; withdrawn: string[] }>(
        'POST',
        '/admin/api/keys/rotate',
        { body: { emergency } },
      );
      if (emergency)
        return `Key ${out.kid} signs now; withdrawn: ${out.withdrawn.join(', ') || 'none'}. Their tokens are refused; clients refresh.`;
      return out.created
        ? `Key ${out.kid} published; it signs from ${when(out.activate_at)} UTC.`
        : `Key ${out.kid} is already the next key; it signs from ${when(out.activate_at)} UTC.`;
    });
}
