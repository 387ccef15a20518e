import { readFile } from 'node:fs/promises';
import { createRemoteJWKSet, decodeJwt, type JWTVerifyGetKey } from 'jose';
import { isMap, isNode, isSeq, LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import { InvalidGrantError, InvalidRequestError } from '../errors.ts';

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

const issuerSchema = z
  .object({
    issuer: z.string().min(1).max(512),
    jwks_uri: keySetUrl,
    kind: z.enum(['id-jag', 'workload']),
    clients: z.array(z.string().min(1)).min(1).optional(),
    email_claim: z.string().min(1).max(100).optional(),
  })
  .strict();

export interface TrustedIssuer {
  issuer: string;
  jwksUri: string;
  kind: 'id-jag' | 'workload';
  /** id-jag: the client ids its grants may be redeemed by; undefined: any registered client. */
  clients?: readonly string[];
  emailClaim: string;
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
    if (v.clients && v.kind !== 'id-jag')
      throw new TrustedIssuersError(`${where}: clients applies to id-jag issuers only`);
    return {
      issuer: v.issuer,
      jwksUri: v.jwks_uri,
      kind: v.kind,
      ...(v.clients ? { clients: v.clients } : {}),
      emailClaim: v.email_claim ?? 'email',
    };
  });
}

/** Key sets like the gateway's: kept an hour, refetched on an unknown kid at most once per 30 s cooldown. */
const KEY_SET_OPTIONS = { cooldownDuration: 30_000, cacheMaxAge: 3_600_000, timeoutDuration: 3000 };

export class TrustedIssuers {
  readonly #path: string;
  readonly #log: Logger;
  #issuers: ReadonlyMap<string, TrustedIssuer>;
  /** By jwks_uri: a reload that keeps an issuer keeps its cached keys. */
  #keySets = new Map<string, JWTVerifyGetKey>();
  #reloading: Promise<boolean> = Promise.resolve(true);

  private constructor(path: string, log: Logger, issuers: TrustedIssuer[]) {
    this.#path = path;
    this.#log = log;
    this.#issuers = new Map(issuers.map((i) => [i.issuer, i]));
  }

  /** Reads the file; a bad one throws TrustedIssuersError (start-up stops). */
  static async load(path: string, log: Logger): Promise<TrustedIssuers> {
    return new TrustedIssuers(path, log, await read(path));
  }

  find(issuer: string): TrustedIssuer | undefined {
    return this.#issuers.get(issuer);
  }

  keys(i: TrustedIssuer): JWTVerifyGetKey {
    let k = this.#keySets.get(i.jwksUri);
    if (!k) {
      k = createRemoteJWKSet(new URL(i.jwksUri), KEY_SET_OPTIONS);
      this.#keySets.set(i.jwksUri, k);
    }
    return k;
  }

  /** SIGHUP: re-reads the file; a bad file keeps the list in force and logs one line. True when swapped. */
  reload(): Promise<boolean> {
    this.#reloading = this.#reloading.then(async () => {
      try {
        const issuers = await read(this.#path);
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
