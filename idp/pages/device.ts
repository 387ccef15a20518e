import { html, page } from './html.ts';
import { scopeList } from './scopes.ts';

// The device verification pages (RFC 8628 §3.3): enter the code shown on the device, confirm the client and
// services, and the outcome. Same look and policy as the consent page; no script.

const brand = html`<p class="brand">Platform sign-in</p>`;

export function deviceEntryPage(v: { email: string; typed?: string; problem?: string }): string {
  const problem = v.problem ? html`<p class="problem">${v.problem}</p>` : html``;
  return page(
    'Connect a device',
    html`${brand}
<h1>Connect a device</h1>
<p class="who">Signed in as ${v.email}</p>
<p>Enter the code your device shows.</p>
${problem}
<form method="get" action="device">
<label for="user_code">Code</label>
<input class="code" id="user_code" name="user_code" value="${v.typed ?? ''}" placeholder="XXXX-XXXX"
 autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="12" required autofocus>
<div class="actions"><button type="submit" class="approve">Continue</button></div>
</form>
<p class="note">Only enter a code from a device you are setting up yourself. Nobody from your organisation
will ever ask you for it.</p>`,
  );
}

export interface DeviceConfirmView {
  clientId: string;
  clientName: string;
  /** The host publishing the client's metadata document, when it has one. */
  metadataHost: string | undefined;
  email: string;
  userCode: string;
  /** The scope the device will receive: every scope of it is named in words. */
  scope: string;
  /** Administrative scopes the device asked for and will not get (never through the device flow). */
  withheld: readonly string[];
  csrfToken: string;
}

export function deviceConfirmPage(v: DeviceConfirmView): string {
  const name = v.clientName.trim() || 'An unnamed application';
  const host = v.metadataHost
    ? html`<p>Its description is published at <span class="host">${v.metadataHost}</span>.</p>`
    : html``;
  const withheld =
    v.withheld.length > 0
      ? html`<p class="problem">It also asked for this, which a device is never given (it is left out). If you did
not start this yourself, choose Deny.</p>
${scopeList(v.withheld.join(' '), 'withheld')}`
      : html``;
  return page(
    `Allow ${name} on your device?`,
    html`${brand}
<h1>Allow <span class="client">${name}</span> on your device?</h1>
<p class="who">Signed in as ${v.email}</p>
<p>Check that your device shows this code:</p>
<p class="code-shown">${v.userCode}</p>
${host}
<p>The device will be allowed to:</p>
${scopeList(v.scope)}
${withheld}
<form method="post" action="device">
<input type="hidden" name="user_code" value="${v.userCode}">
<input type="hidden" name="csrf_token" value="${v.csrfToken}">
<div class="actions">
<button type="submit" name="decision" value="deny" class="deny">Deny</button>
<button type="submit" name="decision" value="approve" class="approve">Allow</button>
</div>
</form>
<p class="note">Client id <span class="host">${v.clientId}</span>. If you did not start this on a device
of your own, choose Deny.</p>`,
  );
}

export function deviceDonePage(v: { approved: boolean; clientName: string }): string {
  const name = v.clientName.trim() || 'the application';
  return v.approved
    ? page(
        'Device connected',
        html`${brand}
<h1 class="done">Device connected</h1>
<p>${name} is signed in. You can close this tab and return to your device.</p>`,
      )
    : page(
        'Request denied',
        html`${brand}
<h1>Request denied</h1>
<p>${name} was not signed in. You can close this tab.</p>`,
      );
}
