// Secret values that were ever published — in deploy/env.example or in the documentation — and so are known to
// everyone: every server refuses them at start-up (lib/config.ts `refuseExampleSecret`). When an example is
// added to env.example or a doc, add its value here: test/security/example-secrets.test.ts reads env.example
// and every code block of README.md and docs/*.md, and fails for an example secret missing from this list.

/** The published values, as written. Compared with white space removed (a PEM or JWK may be re-wrapped). */
export const EXAMPLE_SECRETS: readonly string[] = [
  // deploy/env.example: POSTGRES_PASSWORD, PLATFORM_OIDC_PRIVATE_KEY; the database role and Redis user passwords
  // (PLATFORM_*_DB_PASSWORD, REDIS_*_PASSWORD) are `change-me-…` placeholders, refused by their prefix below.
  'change-me',
  // deploy/env.example: GATEWAY_IDENTITY_SECRET.
  'change-me-to-48-random-bytes-from-openssl-rand-base64',
  // deploy/env.example: PLATFORM_, MAIL_ and DEALS_TOOL_IDENTITY_KEY (derived from the example secret above).
  '26802aa0f4b70841177c9aa77ff119d6f22ebc5e56f5b2aa46135ef4f898d82a',
  'b90df0ce05b0d4a4a235901e91d1340792a53291a03add795a49ce1d58e0555b',
  '7b74d981ab65001ff7f4b5ba8cd92d40803bff857ec31225ce97c569ea1d8033',
];

/** A value beginning with this (any case) is a placeholder someone forgot to replace, listed or not. */
const PLACEHOLDER_PREFIX = 'change-me';

const normalise = (v: string) => v.replace(/\s+/g, '');
const known = new Set(EXAMPLE_SECRETS.map(normalise));

/** Whether `value` is a published example secret (or an obvious placeholder). */
export function isExampleSecret(value: string): boolean {
  const v = normalise(value);
  return known.has(v) || v.toLowerCase().startsWith(PLACEHOLDER_PREFIX);
}
