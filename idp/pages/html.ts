// Server-rendered pages of the provider (consent, refused requests). No script at all; the one stylesheet is
// inline and allowed by its hash, so the page's policy can stay `default-src 'none'`.
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';

/** Escapes text for an HTML text node or a double-quoted attribute value. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`=]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Tagged template whose every interpolation is escaped, unless it is already `Html`. */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}
export function html(strings: TemplateStringsArray, ...values: Array<string | Html | Html[]>): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    const part = Array.isArray(v)
      ? v.map((h) => h.text).join('')
      : v instanceof Html
        ? v.text
        : escapeHtml(v);
    out += part + strings[i + 1]!;
  });
  return new Html(out);
}

const CSS = `
:root{color-scheme:light;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--accent:#0b5cad;--bg:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;background:var(--bg);
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink)}
main{width:100%;max-width:30rem;margin:2rem 1rem;background:#fff;border:1px solid var(--line);border-radius:12px;
padding:2rem 2rem 1.5rem;box-shadow:0 1px 3px rgba(31,35,40,.08)}
.brand{font-size:.8rem;letter-spacing:.08em;text-transform:uppercase;color:var(--muted);margin:0 0 1rem}
h1{font-size:1.35rem;line-height:1.3;margin:0 0 .75rem;overflow-wrap:anywhere}
p{margin:.5rem 0;overflow-wrap:anywhere}
.who{color:var(--muted);font-size:.92rem}
.host{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9rem;background:var(--bg);
border:1px solid var(--line);border-radius:6px;padding:.1rem .4rem}
ul.services{list-style:none;padding:0;margin:1rem 0;border:1px solid var(--line);border-radius:8px}
ul.services li{padding:.6rem .9rem;border-top:1px solid var(--line)}
ul.services li:first-child{border-top:0}
ul.services .name{font-weight:600}
ul.services .scope{display:block;color:var(--muted);font-size:.85rem;font-family:ui-monospace,Menlo,Consolas,monospace}
.actions{display:flex;gap:.75rem;justify-content:flex-end;margin-top:1.5rem}
button{font:inherit;font-weight:600;border-radius:8px;padding:.55rem 1.2rem;cursor:pointer;border:1px solid var(--line)}
button.approve{background:var(--accent);border-color:var(--accent);color:#fff}
button.deny{background:#fff;color:var(--ink)}
button:focus-visible{outline:3px solid #8cc2f5;outline-offset:2px}
.note{color:var(--muted);font-size:.85rem;margin-top:1.25rem;border-top:1px solid var(--line);padding-top:.9rem}
.problem{color:#a40e26}
label{display:block;font-weight:600;margin:1rem 0 .4rem}
input.code{display:block;width:100%;font:600 1.4rem/1.2 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
letter-spacing:.12em;text-transform:uppercase;padding:.6rem .8rem;border:1px solid var(--line);border-radius:8px}
input.code:focus-visible{outline:3px solid #8cc2f5;outline-offset:1px}
.code-shown{font:600 1.5rem ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;letter-spacing:.12em;
text-align:center;background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:.5rem;margin:1rem 0}
.done{color:#1a7f37}
ul.services li.power{background:#fff5f5;box-shadow:inset 4px 0 0 #a40e26}
ul.services li.power .name{color:#a40e26}
ul.withheld .name{text-decoration:line-through}
`.trim();

/** A stylesheet's CSP source: the only way a page of ours may be styled. */
export function styleHash(css: string): string {
  return `'sha256-${createHash('sha256').update(css).digest('base64')}'`;
}

const CSS_HASH = styleHash(CSS);

/**
 * The page policy: nothing but the inline stylesheet (by hash); forms post only to this origin, plus the
 * origin the consent decision redirects to (Chromium applies form-action to the redirect after a POST).
 */
export function pagePolicy(formTargets: readonly string[] = [], style = CSS_HASH): string {
  return [
    "default-src 'none'",
    `style-src ${style}`,
    `form-action ${["'self'", ...formTargets].join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export function page(title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${title}</title><style>${new Html(CSS)}</style></head>
<body><main>${body}</main></body></html>
`.text;
}

export function sendPage(
  res: ServerResponse,
  status: number,
  document: string,
  opts: { formTargets?: readonly string[]; styleHash?: string } = {},
): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(document),
    'cache-control': 'no-store',
    'content-security-policy': pagePolicy(opts.formTargets, opts.styleHash),
  });
  res.end(document);
}

/** The page a person sees when an authorization request cannot be sent back to its client. */
export function refusedPage(reason: string): string {
  return page(
    'Sign-in request refused',
    html`<p class="brand">Platform sign-in</p>
<h1>This sign-in request was refused</h1>
<p class="problem">Authorization request refused: ${reason}</p>
<p class="note">The application that sent you here made a request this sign-in service cannot accept. Close this
tab and start again from the application; if it keeps happening, tell the application's owner.</p>`,
  );
}
