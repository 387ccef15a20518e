import { type Html, html, page } from './html.ts';
import { scopeList } from './scopes.ts';

export interface ConsentView {
  clientId: string;
  clientName: string;
  /** Where the client lives: the host its redirect URI sends the browser to, or its metadata document's. */
  host: { value: string; kind: 'redirect' | 'loopback' | 'app' | 'metadata' };
  email: string;
  /** The scope the client will receive: every scope of it is named in words (scopeList). */
  scope: string;
  /** The authorization request's parameters, carried through the form unchanged. */
  params: ReadonlyMap<string, string>;
  csrfToken: string;
}

function hostLine(host: ConsentView['host']): Html {
  const h = html`<span class="host">${host.value}</span>`;
  switch (host.kind) {
    case 'loopback':
      return html`It will send you back to ${h}, an application running on this computer.`;
    case 'app':
      return html`It will send you back to the application that opens ${h} links on this device.`;
    case 'metadata':
      return html`Its description is published at ${h}.`;
    default:
      return html`It will send you back to ${h}.`;
  }
}

export function consentPage(v: ConsentView): string {
  const name = v.clientName.trim() || 'An unnamed application';
  const hidden = [...v.params].map(([k, val]) => html`<input type="hidden" name="${k}" value="${val}">`);
  return page(
    `Allow ${name}?`,
    html`<p class="brand">Platform sign-in</p>
<h1>Allow <span class="client">${name}</span> to act for you?</h1>
<p class="who">Signed in as ${v.email}</p>
<p>${hostLine(v.host)}</p>
<p>It will be allowed to:</p>
${scopeList(v.scope)}
<form method="post" action="authorize">
${hidden}<input type="hidden" name="csrf_token" value="${v.csrfToken}">
<div class="actions">
<button type="submit" name="decision" value="deny" class="deny">Deny</button>
<button type="submit" name="decision" value="approve" class="approve">Allow</button>
</div>
</form>
<p class="note">Client id <span class="host">${v.clientId}</span>. Allow only applications you started yourself.
Your administrator can withdraw this permission at any time.</p>`,
  );
}
