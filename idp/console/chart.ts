// The audit page's chart: issuances and refusals per hour as an inline SVG drawn on the server (no script;
// presentation by attributes and the page's stylesheet classes, never a style attribute the policy would block).
import { type Html, html } from '../pages/html.ts';

const WIDTH = 960;
const HEIGHT = 240;
const LEFT = 48;
const RIGHT = 12;
const TOP = 14;
const BOTTOM = 40;

/** A round axis maximum at or above `n`: 1, 2, 5 × a power of ten. */
function niceMax(n: number): number {
  if (n <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 4, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

const f = (n: number) => n.toFixed(1);

export function perHourChart(hours: ReadonlyArray<{ hour: string; issued: number; refused: number }>): Html {
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const max = niceMax(Math.max(0, ...hours.map((h) => Math.max(h.issued, h.refused))));
  const slot = plotW / Math.max(1, hours.length);
  const barW = Math.max(1, slot * 0.36);
  const y = (v: number) => TOP + plotH - (v / max) * plotH;
  const ticks = [0, max / 4, max / 2, (3 * max) / 4, max];
  const grid = ticks.map(
    (
      t,
    ) => html`<line class="grid" x1="${String(LEFT)}" x2="${String(WIDTH - RIGHT)}" y1="${f(y(t))}" y2="${f(y(t))}"></line>
<text x="${String(LEFT - 6)}" y="${f(y(t) + 4)}" text-anchor="end">${Number.isInteger(t) ? String(t) : t.toFixed(1)}</text>`,
  );
  const bars = hours.map((h, i) => {
    const x0 = LEFT + i * slot + (slot - 2 * barW) / 2;
    const label = `${h.hour.slice(0, 10)} ${h.hour.slice(11, 16)} UTC: ${h.issued} issued, ${h.refused} refused`;
    const hi = (h.issued / max) * plotH;
    const hr = (h.refused / max) * plotH;
    return html`<g><title>${label}</title>
<rect class="bar-issued" x="${f(x0)}" y="${f(TOP + plotH - hi)}" width="${f(barW)}" height="${f(hi)}"></rect>
<rect class="bar-refused" x="${f(x0 + barW)}" y="${f(TOP + plotH - hr)}" width="${f(barW)}" height="${f(hr)}"></rect></g>`;
  });
  const labels = hours.flatMap((h, i) => {
    const hh = Number(h.hour.slice(11, 13));
    if (hh % 6 !== 0) return [];
    const x = LEFT + i * slot + slot / 2;
    return [
      html`<line class="axis" x1="${f(x)}" x2="${f(x)}" y1="${String(TOP + plotH)}" y2="${String(TOP + plotH + 4)}"></line>
<text x="${f(x)}" y="${String(TOP + plotH + 16)}" text-anchor="middle">${h.hour.slice(11, 16)}</text>${
        hh === 0
          ? html`<text x="${f(x)}" y="${String(TOP + plotH + 30)}" text-anchor="middle">${h.hour.slice(5, 10)}</text>`
          : html``
      }`,
    ];
  });
  return html`<svg class="chart" viewBox="0 0 ${String(WIDTH)} ${String(HEIGHT)}" role="img" aria-label="Issuances and refusals per hour, last ${String(hours.length)} hours">
${grid}${bars}
<line class="axis" x1="${String(LEFT)}" x2="${String(WIDTH - RIGHT)}" y1="${String(TOP + plotH)}" y2="${String(TOP + plotH)}"></line>
${labels}
<text x="12" y="${String(TOP + plotH / 2)}" text-anchor="middle" transform="rotate(-90 12 ${String(TOP + plotH / 2)})">per hour</text>
</svg>`;
}
