import { z } from 'zod';

// The policy file's shape (GATEWAY_POLICY_FILE, YAML). Every matcher is optional (absent: matches anything);
// `effect` decides. Matchers take one value or a list (any of the list matches), except `scope`, which names
// scopes the token must all carry.

const name = z.string().trim().min(1, 'must not be empty');
const oneOrMany = z.union([name, z.array(name).min(1, 'must list at least one value')], {
  error: 'must be a name or a list of names',
});

const EMAIL = /^[^\s@]+@[^\s@]+$|^\*@[^\s@]+$/;
const email = name.regex(EMAIL, 'must be an email address, or *@domain for every address of a domain');

export const ISSUERS = ['platform', 'entra', 'service'] as const;
const ISSUER_ERROR = 'must be platform, entra or service (or a list of them)';
const issuer = z.enum(ISSUERS, { error: ISSUER_ERROR });

const matchers = {
  service: oneOrMany.optional(),
  method: oneOrMany.optional(),
  tool: oneOrMany.optional(),
  email: z.union([email, z.array(email).min(1, 'must list at least one address')]).optional(),
  issuer: z
    .union([issuer, z.array(issuer).min(1, 'must list at least one issuer')], { error: ISSUER_ERROR })
    .optional(),
  // The client acting for the user in a delegated token (its `act.sub`); `*` matches any actor. A rule with
  // `actor:` never matches a request without one.
  actor: oneOrMany.optional(),
  // A string is split on spaces, as in a token's `scope`.
  scope: z.union([name, z.array(name).min(1)]).optional(),
  description: z.string().optional(),
};

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/; // RFC 6749 §3.3

export const ruleSchema = z.discriminatedUnion(
  'effect',
  [
    z.strictObject({ ...matchers, effect: z.literal('allow') }),
    z.strictObject({ ...matchers, effect: z.literal('deny') }),
    z.strictObject({
      ...matchers,
      effect: z.literal('require_scope'),
      required_scope: name.regex(SCOPE_TOKEN, 'must be one scope (no spaces or quotes)'),
    }),
  ],
  { error: 'effect must be one of allow, deny, require_scope' },
);

// `limits:` (beside `rules:`): `{service?, tool?, per: email | client, rate: <count>/<seconds>}`, counted across
// the gateway's replicas (gateway/limits/).
const RATE = /^([1-9]\d{0,8})\/([1-9]\d{0,6})$/;
export const limitSchema = z.strictObject({
  service: oneOrMany.optional(),
  tool: oneOrMany.optional(),
  per: z.enum(['email', 'client'], { error: 'must be email or client' }),
  rate: z
    .string({ error: 'must be <count>/<seconds>, e.g. 60/60' })
    .trim()
    .regex(RATE, 'must be <count>/<seconds> with whole numbers above 0, e.g. 60/60')
    .transform((v) => {
      const [, count, seconds] = RATE.exec(v)!;
      return { count: Number(count), seconds: Number(seconds) };
    }),
  description: z.string().optional(),
});

export const policySchema = z.strictObject({
  rules: z.array(z.unknown(), { error: 'rules must be a list of rules' }),
});

export type Rule = z.infer<typeof ruleSchema>;
export type Limit = z.infer<typeof limitSchema>;
export type Issuer = (typeof ISSUERS)[number];
