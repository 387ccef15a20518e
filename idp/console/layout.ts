// The console's page shell: the consent page's palette on a wider, top-aligned layout with a navigation bar.
// No script at all; the one stylesheet is inline and allowed by its hash (the same policy as the consent page,
// with this stylesheet's hash), and forms post only to this origin.
import type { ServerResponse } from 'node:http';
import { Html, html, sendPage, styleHash } from '../pages/html.ts';

const CSS = `
:root{color-scheme:light;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--accent:#0b5cad;--bg:#f6f8fa;
--issued:#0b5cad;--refused:#c4314b;--ok:#1a7f37}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header{background:#fff;border-bottom:1px solid var(--line)}
.bar{max-width:76rem;margin:0 auto;padding:.7rem 1.5rem;display:flex;align-items:center;gap:1.5rem;flex-wrap:wrap}
.brand{font-size:.8rem;letter-spacing:.08em;text-transform:uppercase;color:var(--muted);margin:0;white-space:nowrap}
nav{display:flex;gap:.25rem}
nav a{color:var(--ink);text-decoration:none;padding:.35rem .75rem;border-radius:6px;font-weight:600}
nav a:hover{background:var(--bg)}
nav a.here{background:var(--bg);color:var(--accent);box-shadow:inset 0 -2px 0 var(--accent)}
form.find{display:flex;gap:.4rem;margin-left:auto}
.who{color:var(--muted);font-size:.85rem;white-space:nowrap}
main{max-width:76rem;margin:1.5rem auto;padding:0 1.5rem}
section.card{background:#fff;border:1px solid var(--line);border-radius:12px;padding:1.25rem 1.5rem;margin:0 0 1.25rem;
box-shadow:0 1px 3px rgba(31,35,40,.08)}
h1{font-size:1.4rem;line-height:1.3;margin:0 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.05rem;margin:0 0 .75rem}
p{margin:.5rem 0;overflow-wrap:anywhere}
.muted{color:var(--muted)}
.small{font-size:.85rem}
a{color:var(--accent)}
.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em}
table{width:100%;border-collapse:collapse;font-size:.9rem}
th{text-align:left;font-weight:600;color:var(--muted);font-size:.78rem;text-transform:uppercase;letter-spacing:.04em;
border-bottom:1px solid var(--line);padding:.45rem .6rem}
td{border-bottom:1px solid #eaeef2;padding:.5rem .6rem;vertical-align:top;overflow-wrap:anywhere}
tr:last-child td{border-bottom:0}
td.nowrap,th.nowrap{white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td form{margin:0}
.badge{display:inline-block;border-radius:999px;padding:.05rem .55rem;font-size:.78rem;font-weight:600;
border:1px solid var(--line);background:var(--bg);white-space:nowrap}
.badge.issued{color:var(--issued);border-color:#b6d4f2;background:#eef5fc}
.badge.refused{color:var(--refused);border-color:#f2c3cc;background:#fdf0f2}
.badge.admin{color:#6639ba;border-color:#d8c8f2;background:#f6f1fd}
.badge.ok{color:var(--ok);border-color:#b7e0c2;background:#eefaf1}
.filters{display:grid;grid-template-columns:repeat(5,minmax(0,1fr));gap:.75rem;align-items:end}
.filters label{display:block;font-size:.78rem;font-weight:600;color:var(--muted);margin:0 0 .25rem}
input,select{font:inherit;width:100%;padding:.4rem .55rem;border:1px solid var(--line);border-radius:6px;background:#fff}
form.find input{width:16rem}
input[type=checkbox]{width:auto;margin:0 .4rem 0 0;vertical-align:-2px}
input:focus-visible,select:focus-visible,button:focus-visible,a:focus-visible{outline:3px solid #8cc2f5;outline-offset:1px}
.row{display:flex;gap:.6rem;align-items:center;flex-wrap:wrap;margin-top:.9rem}
.spacer{flex:1}
.row h1{margin:0}
button,.button{font:inherit;font-weight:600;font-size:.88rem;border-radius:6px;padding:.35rem .9rem;cursor:pointer;
border:1px solid var(--line);background:#fff;color:var(--ink);text-decoration:none;display:inline-block;white-space:nowrap}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button.danger{color:var(--refused);border-color:#f2c3cc}
button.danger.strong{background:var(--refused);border-color:var(--refused);color:#fff}
.flash{border-radius:8px;padding:.6rem .9rem;margin:0 0 1.25rem;border:1px solid #b7e0c2;background:#eefaf1;color:var(--ok)}
.flash.error{border-color:#f2c3cc;background:#fdf0f2;color:var(--refused)}
.pager{display:flex;gap:.6rem;align-items:center;margin-top:.9rem}
.chart{width:100%;height:auto;display:block}
.chart .grid{stroke:#eaeef2;stroke-width:1}
.chart .axis{stroke:var(--line);stroke-width:1}
.chart text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:var(--muted)}
.chart .bar-issued{fill:var(--issued)}
.chart .bar-refused{fill:var(--refused)}
.legend{display:flex;gap:1.25rem;font-size:.85rem;color:var(--muted);margin:.25rem 0 .5rem}
.key{display:inline-block;width:.8rem;height:.8rem;border-radius:2px;margin-right:.35rem;vertical-align:-1px}
.key.issued{background:var(--issued)}
.key.refused{background:var(--refused)}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:1.25rem}
.problem{color:var(--refused)}
main.narrow{max-width:34rem;margin-top:4rem}
form.stack>div{margin:0 0 .8rem}
form.stack label,.label{display:block;font-size:.78rem;font-weight:600;color:var(--muted);margin:0 0 .25rem}
textarea{font:inherit;width:100%;box-sizing:border-box;padding:.4rem .55rem;border:1px solid var(--line);border-radius:6px;background:#fff}
.checks{display:flex;gap:1.25rem;flex-wrap:wrap}
form.stack label.check{display:inline-flex;gap:.35rem;align-items:center;font-size:.9rem;font-weight:400;color:var(--ink);margin:0}
label.check input{width:auto}
`.trim();

const CSS_HASH = styleHash(CSS);

export type ConsoleTab = 'audit' | 'users' | 'clients' | 'machine-clients' | 'keys';

const TABS: ReadonlyArray<[ConsoleTab, string, string]> = [
  ['audit', 'Audit', '/admin/audit'],
  ['users', 'Users', '/admin/users'],
  ['clients', 'Clients', '/admin/clients'],
  ['machine-clients', 'Machine clients', '/admin/machine-clients'],
  ['keys', 'Signing keys', '/admin/keys'],
];

export interface Flash {
  kind: 'ok' | 'error';
  text: string;
}

/** A console page: the navigation bar (with the user search box), an optional flash line, the content. */
export function consolePage(o: {
  title: string;
  tab?: ConsoleTab;
  email?: string;
  flash?: Flash | undefined;
  body: Html;
}): string {
  const nav = o.email
    ? html`<nav>${TABS.map(
        ([tab, label, href]) =>
          html`<a href="${href}"${o.tab === tab ? html` class="here"` : html``}>${label}</a>`,
      )}</nav>
<form class="find" method="get" action="/admin/users"><input type="search" name="email" placeholder="Find a user by email" aria-label="Find a user by email" required minlength="2"><button type="submit">Find</button></form>
<span class="who">${o.email}</span>`
    : html``;
  const flash = o.flash
    ? html`<p class="flash${o.flash.kind === 'error' ? ' error' : ''}" role="status">${o.flash.text}</p>`
    : html``;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${o.title} · Platform admin</title><style>${new Html(CSS)}</style></head>
<body><header><div class="bar"><p class="brand">Platform admin</p>${nav}</div></header>
<main${o.email ? html`` : html` class="narrow"`}>${flash}${o.body}</main></body></html>
`.text;
}

export function sendConsolePage(res: ServerResponse, status: number, document: string): void {
  sendPage(res, status, document, { styleHash: CSS_HASH });
}

/** The page for a refused or failed console request (400, 403, 404, 405): what was wrong, never a stack. */
export function problemPage(o: { status: number; message: string; email?: string }): string {
  const title =
    o.status === 403
      ? 'Not allowed'
      : o.status === 404
        ? 'Not found'
        : o.status === 405
          ? 'Method not allowed'
          : 'Bad request';
  return consolePage({
    title,
    email: o.email,
    body: html`<section class="card"><h1>${title}</h1><p class="problem">${o.message}</p>
<p class="muted small">${o.email ? html`<a href="/admin/audit">Back to the console</a>` : html`This page is for the platform's administrators.`}</p></section>`,
  });
}
