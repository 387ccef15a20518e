// Every scope a client or device will receive, in words, for the consent and device pages. One list item per
// line: the identity scopes together (they reveal one thing, who you are), then each service, then each
// administrative power, marked so it stands out.
import { ADMIN_SCOPE, SEND_AS_SCOPE } from '../../lib/admin-powers.ts';
import { type Html, html } from './html.ts';

export interface ScopeLine {
  /** What the scopes allow, in words. */
  words: string;
  /** The scope names the line stands for, space-separated as in the request. */
  scopes: string;
  /** An administrative power over other users. */
  power: boolean;
}

const IDENTITY: ReadonlySet<string> = new Set(['openid', 'profile', 'email']);

/** The services of the default configuration in words; any other service reads "Use the X tools as you". */
const SERVICE_WORDS: Readonly<Record<string, string>> = {
  platform: 'Use the platform tools as you (who you are signed in as)',
  mail: 'Send mail and create calendar events as you, from your own mailbox',
  deals: 'Read deals and propose deal closures as you',
  calendar: 'Use your calendar as you',
  crm: 'Use the CRM as you',
};

const POWER_WORDS: Readonly<Record<string, string>> = {
  [SEND_AS_SCOPE]: 'Send mail and create calendar events as any other user of the platform',
  [ADMIN_SCOPE]:
    'Administer the platform: revoke any user’s tokens and sign-ins, grant and withdraw services, read the audit',
};

/** The lines for a space-separated scope, in its order; a scope without words is named as it is. */
export function scopeLines(scope: string): ScopeLine[] {
  const scopes = scope.split(' ').filter((s) => s !== '');
  const lines: ScopeLine[] = [];
  const identity = scopes.filter((s) => IDENTITY.has(s));
  if (identity.length > 0) {
    lines.push({
      words: identity.includes('email')
        ? 'Know who you are: your account and your email address'
        : 'Know who you are: your account',
      scopes: identity.join(' '),
      power: false,
    });
  }
  for (const s of scopes) {
    if (IDENTITY.has(s)) continue;
    const power = POWER_WORDS[s];
    if (power) {
      lines.push({ words: power, scopes: s, power: true });
      continue;
    }
    if (s === 'offline_access') {
      lines.push({
        words: 'Stay connected when you are not using it (a refresh token)',
        scopes: s,
        power: false,
      });
      continue;
    }
    const service = s.startsWith('mcp:') ? s.slice(4) : undefined;
    const words = service ? (SERVICE_WORDS[service] ?? `Use the ${service} tools as you`) : s;
    lines.push({ words, scopes: s, power: false });
  }
  return lines;
}

/**
 * The list itself: every line with its words and, below them, the scope names. `withheld` marks a list of what
 * was asked for and will not be given.
 */
export function scopeList(scope: string, kind: 'granted' | 'withheld' = 'granted'): Html {
  const lines = scopeLines(scope);
  if (lines.length === 0) return html`<p>Nothing beyond confirming the sign-in.</p>`;
  return html`<ul class="${kind === 'granted' ? 'services' : 'services withheld'}">${lines.map(
    (l) =>
      html`<li${l.power ? html` class="power"` : html``}><span class="name">${l.words}</span><span class="scope">${l.scopes}</span></li>`,
  )}</ul>`;
}
