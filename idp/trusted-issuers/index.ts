import { readFile } from 'node:fs/promises';
import { createLocalJWKSet, decodeJwt, type JWTVerifyGetKey, errors as joseErrors } from 'jose';
import { isMap, isNode, isSeq, LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import { checkKeySet } from '../client-auth/key-sets.ts';
import { InvalidGrantError, InvalidRequestError, OAuthError } from '../errors.ts';
import { createOutboundBudget, type FetchGate, type OutboundBudget } from '../outbound/index.ts';

// PLATFORM_TRUSTED_ISSUERS_FILE (docs/idp.md § Trusted assertion issuers): the issuers whose signed assertions
// the token endpoint accepts as grants — `workload` issuers (a CI provider's or Kubernetes' OIDC tokens, mapped
// to machine clients) and `id-jag` issuers (enterprise IdPs). Reloaded on SIGHUP; a bad file keeps the old list.

/** A file that cannot be used; the message is one line naming the problem. */
export class TrustedIssuersError extends Error {
  override readonly name = 'TrustedIssuersError';
}

/** Operator-written URLs: https, or http on a loopback host (a local stand-in). */
const keySetUrl = z.string().refine((v) => {
  try {
    const u = new URL(v);
    return (
      u.protocol === 'https:' ||
      (u.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname))
    );
  } catch {
    return false;
  }
}, 'must be an https URL (http only on a loopback host)');

/** An email domain as an operator writes it (`example.com`), or `*`: any domain. */
const emailDomain = z
  .string()
  .transform((v) => v.trim().toLowerCase())
  .refine(
    (v) => v === '*' || /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$/.test(v),
    'must be a domain name (example.com) or "*"',
  );

const issuerSchema = z
  .object({
    issuer: z.string().min(1).max(512),
    jwks_uri: keySetUrl,
    kind: z.enum(['id-jag', 'workload']),
    clients: z.array(z.string().min(1)).min(1).optional(),
    email_claim: z.string().min(1).max(100).optional(),
    email_domains: z.array(emailDomain).min(1).max(100).optional(),
    subject_provider: z.string().min(1).max(255).optional(),
  })
  .strict();

export interface TrustedIssuer {
  issuer: string;
  jwksUri: string;
  kind: 'id-jag' | 'workload';
  /** id-jag: the client ids its grants may be redeemed by; undefined: any registered client. */
  clients?: readonly string[];
  emailClaim: string;
  /**
   * id-jag: the email domains of the users its grants may name (lowercase; `*`: any). Undefined: any domain no
   * other issuer lists (the files written before this member existed keep working; a warning says so).
   */
  emailDomains?: readonly string[];
  /**
   * id-jag: the Auth.js `accounts.provider` under which the user signed in through this issuer; the grant's
   * `sub` must be that account's providerAccountId. Undefined: `sub` is not matched.
   */
  subjectProvider?: string;
}

export function parseTrustedIssuers(text: string): TrustedIssuer[] {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const yamlError = doc.errors[0];
  if (yamlError)
    throw new TrustedIssuersError(
      `not valid YAML at line ${lines.linePos(yamlError.pos[0]).line}: ${yamlError.message.split('\n')[0]}`,
    );
  const root = doc.contents;
  if (!isMap(root) || !root.has('issuers'))
    throw new TrustedIssuersError('the file must be a mapping with an `issuers:` list');
  if (root.items.length !== 1) throw new TrustedIssuersError('only `issuers:` is read at the top level');
  const seq = root.get('issuers', true);
  if (!isSeq(seq)) throw new TrustedIssuersError('`issuers:` must be a list');
  const seen = new Set<string>();
  return seq.items.map((node, i) => {
    const line = isNode(node) && node.range ? `, line ${lines.linePos(node.range[0]).line}` : '';
    const where = `issuer ${i + 1} (issuers[${i}]${line})`;
    const parsed = issuerSchema.safeParse(isNode(node) ? node.toJSON() : null);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const path = issue.path.length ? `${issue.path.join('.')}: ` : '';
      throw new TrustedIssuersError(`${where}: ${path}${issue.message}`);
    }
    const v = parsed.data;
    if (seen.has(v.issuer)) throw new TrustedIssuersError(`${where}: issuer ${v.issuer} is listed twice`);
    seen.add(v.issuer);
    for (const member of ['clients', 'email_domains', 'subject_provider'] as const)
      if (v[member] !== undefined && v.kind !== 'id-jag')
        throw new TrustedIssuersError(`${where}: ${member} applies to id-jag issuers only`);
    return {
      issuer: v.issuer,
      jwksUri: v.jwks_uri,
      kind: v.kind,
      ...(v.clients ? { clients: v.clients } : {}),
      emailClaim: v.email_claim ?? 'email',
      ...(v.email_domains ? { emailDomains: [...new Set(v.email_domains)] } : {}),
      ...(v.subject_provider ? { subjectProvider: v.subject_provider } : {}),
    };
  });
}

/** Key sets like the gateway's: kept an hour, refetched on an unknown kid at most once per 30 s. */
const KEY_SET_MAX_AGE_MS = 3_600_000;
const KEY_SET_REFETCH_MS = 30_000;
const KEY_SET_TIMEOUT_MS = 3000;
const KEY_SET_MAX_BYTES = 64 * 1024;

/** GETs an issuer's key set (an operator-named URL: no address rules); every failure is an Error saying why. */
async function fetchKeySet(url: URL): Promise<JWTVerifyGetKey> {
  const signal = AbortSignal.timeout(KEY_SET_TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'error', headers: { accept: 'application/json' } });
  } catch (err) {
    throw new Error(
      signal.aborted ? 'timed out' : (((err as Error).cause as { code?: string })?.code ?? 'error'),
    );
  }
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  if (Number(res.headers.get('content-length')) > KEY_SET_MAX_BYTES) {
    await res.body?.cancel();
    throw new Error(`larger than ${KEY_SET_MAX_BYTES} bytes`);
  }
  const text = await res.text();
  if (text.length > KEY_SET_MAX_BYTES) throw new Error(`larger than ${KEY_SET_MAX_BYTES} bytes`);
  try {
    return createLocalJWKSet(checkKeySet(JSON.parse(text)));
  } catch (err) {
    throw new Error(`not a key set: ${(err as Error).message}`);
  }
}

/**
 * One issuer's key set, fetched within the IdP's outbound-fetch budget (idp/outbound): loaded on first use, kept
 * an hour, fetched again for a `kid` it does not hold at most once per 30 s; a failed fetch is not repeated
 * within the budget's cool-down. Any failure reads as a key that cannot be found (the grant is refused).
 */
class IssuerKeySet {
  readonly #url: URL;
  readonly #budget: OutboundBudget;
  #keys: { get: JWTVerifyGetKey; at: number } | undefined;

  constructor(url: string, budget: OutboundBudget) {
    this.#url = new URL(url);
    this.#budget = budget;
  }

  getKey(gate: FetchGate): JWTVerifyGetKey {
    return async (header, token) => {
      const held = this.#keys;
      if (held && Date.now() - held.at < KEY_SET_MAX_AGE_MS) {
        try {
          return await held.get(header, token);
        } catch (err) {
          if (!(err instanceof joseErrors.JWKSNoMatchingKey) || Date.now() - held.at < KEY_SET_REFETCH_MS)
            throw err;
        }
      }
      let get: JWTVerifyGetKey;
      try {
        get = await this.#budget.fetch(this.#url, gate, async (u) => ({
          value: await fetchKeySet(u),
          cacheSeconds: KEY_SET_MAX_AGE_MS / 1000,
        }));
      } catch (err) {
        // A refusal by the gate (429) is the client's answer as it is.
        if (err instanceof OAuthError) throw err;
        throw new joseErrors.JWKSInvalid(
          `the issuer's key set could not be fetched: ${(err as Error).message}`,
        );
      }
      if (this.#keys?.get !== get) this.#keys = { get, at: Date.now() };
      return get(header, token);
    };
  }
}

export class TrustedIssuers {
  readonly #path: string;
  readonly #log: Logger;
  #issuers: ReadonlyMap<string, TrustedIssuer>;
  readonly #budget: OutboundBudget;
  /** By jwks_uri: a reload that keeps an issuer keeps its cached keys. */
  #keySets = new Map<string, IssuerKeySet>();
  #reloading: Promise<boolean> = Promise.resolve(true);

  private constructor(path: string, log: Logger, issuers: TrustedIssuer[], budget: OutboundBudget) {
    this.#path = path;
    this.#log = log;
    this.#issuers = new Map(issuers.map((i) => [i.issuer, i]));
    this.#budget = budget;
  }

  /**
   * Reads the file; a bad one throws TrustedIssuersError (start-up stops). Key sets are fetched within `budget`,
   * the IdP's one outbound-fetch budget.
   */
  static async load(
    path: string,
    log: Logger,
    budget: OutboundBudget = createOutboundBudget(),
  ): Promise<TrustedIssuers> {
    const issuers = await read(path);
    warnUnrestricted(issuers, log);
    return new TrustedIssuers(path, log, issuers, budget);
  }

  find(issuer: string): TrustedIssuer | undefined {
    return this.#issuers.get(issuer);
  }

  /**
   * May this id-jag issuer name a user with this email domain? Yes when its `email_domains` lists the domain (or
   * `*`); with no `email_domains`, when no other id-jag issuer lists the domain (a domain an operator tied to
   * its enterprise IdP is that IdP's alone).
   */
  mayName(i: TrustedIssuer, domain: string): boolean {
    const d = domain.toLowerCase();
    if (i.emailDomains?.includes(d)) return true;
    if (i.emailDomains && !i.emailDomains.includes('*')) return false;
    for (const other of this.#issuers.values())
      if (other !== i && other.kind === 'id-jag' && other.emailDomains?.includes(d)) return false;
    return true;
  }

  /** The issuer's keys for one verification; a network fetch they need is counted by `gate`. */
  keys(i: TrustedIssuer, gate: FetchGate): JWTVerifyGetKey {
    let k = this.#keySets.get(i.jwksUri);
    if (!k) {
      k = new IssuerKeySet(i.jwksUri, this.#budget);
      this.#keySets.set(i.jwksUri, k);
    }
    return k.getKey(gate);
  }

  /** SIGHUP: re-reads the file; a bad file keeps the list in force and logs one line. True when swapped. */
  reload(): Promise<boolean> {
    this.#reloading = this.#reloading.then(async () => {
      try {
        const issuers = await read(this.#path);
        warnUnrestricted(issuers, this.#log);
        this.#issuers = new Map(issuers.map((i) => [i.issuer, i]));
        const uris = new Set(issuers.map((i) => i.jwksUri));
        for (const uri of this.#keySets.keys()) if (!uris.has(uri)) this.#keySets.delete(uri);
        this.#log.info({ file: this.#path, issuers: issuers.length }, 'trusted issuers reloaded');
        return true;
      } catch (err) {
        this.#log.error(
          { file: this.#path },
          `trusted issuers not reloaded, the previous list stays in force: ${(err as Error).message}`,
        );
        return false;
      }
    });
    return this.#reloading;
  }
}

/** One line per id-jag issuer that may name users of any domain no other issuer lists (docs/idp.md). */
function warnUnrestricted(issuers: readonly TrustedIssuer[], log: Logger): void {
  for (const i of issuers)
    if (i.kind === 'id-jag' && i.emailDomains === undefined)
      log.warn(
        { issuer: i.issuer },
        'trusted id-jag issuer without email_domains: its grants may name any platform user whose email domain no other issuer lists; set email_domains (or "*" to accept this)',
      );
}

async function read(path: string): Promise<TrustedIssuer[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new TrustedIssuersError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  return parseTrustedIssuers(text);
}

/** The longest assertion the token endpoint reads (an ID-JAG or a workload token). */
export const MAX_ASSERTION_BYTES = 16_384;

/**
 * The `assertion` of a jwt-bearer request and the trusted issuer of `kind` its `iss` names (the signature is not
 * checked yet: the caller verifies it with that issuer's keys). Every refusal is an OAuth error.
 */
export function trustedAssertion(
  issuers: TrustedIssuers | undefined,
  form: ReadonlyMap<string, string>,
  kind: TrustedIssuer['kind'],
): { assertion: string; trusted: TrustedIssuer } {
  const assertion = form.get('assertion');
  if (!assertion) throw new InvalidRequestError('assertion is missing');
  if (assertion.length > MAX_ASSERTION_BYTES) throw new InvalidGrantError('assertion is too large');
  let iss: unknown;
  try {
    iss = decodeJwt(assertion).iss;
  } catch {
    throw new InvalidGrantError('assertion is not a JWT');
  }
  const trusted = typeof iss === 'string' ? issuers?.find(iss) : undefined;
  if (trusted?.kind !== kind) throw new InvalidGrantError(`assertion issuer is not a trusted ${kind} issuer`);
  return { assertion, trusted };
}
