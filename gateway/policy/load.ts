import { readFile } from 'node:fs/promises';
import { isMap, isNode, isSeq, LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';
import { type Limit, limitSchema, type Rule, ruleSchema } from './schema.ts';

/** A policy file that cannot be used; the message is one line naming the file's bad rule (or the YAML error). */
export class PolicyFileError extends Error {
  override readonly name = 'PolicyFileError';
}

export interface LoadPolicyOptions {
  /** The gateway's services: a rule naming another is a typo, refused rather than silently never matching. */
  services: readonly string[];
}

/** A policy file's content: its rules and its rate limits, each in file order. */
export interface PolicyDocument {
  rules: Rule[];
  limits: Limit[];
}

/** Reads and checks a policy file (YAML); returns its rules in file order. */
export async function loadPolicyFile(path: string, opts: LoadPolicyOptions): Promise<Rule[]> {
  return (await loadPolicyDocument(path, opts)).rules;
}

/** Reads and checks a policy file (YAML): its rules and its `limits:`. */
export async function loadPolicyDocument(path: string, opts: LoadPolicyOptions): Promise<PolicyDocument> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new PolicyFileError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  return parsePolicyDocument(text, opts);
}

export function parsePolicy(text: string, opts: LoadPolicyOptions): Rule[] {
  return parsePolicyDocument(text, opts).rules;
}

export function parsePolicyDocument(text: string, opts: LoadPolicyOptions): PolicyDocument {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const yamlError = doc.errors[0];
  if (yamlError) {
    const at = lines.linePos(yamlError.pos[0]);
    throw new PolicyFileError(`not valid YAML at line ${at.line}: ${firstLine(yamlError.message)}`);
  }
  const root = doc.contents;
  if (!isMap(root) || !root.has('rules')) {
    throw new PolicyFileError('the file must be a mapping with a `rules:` list');
  }
  for (const item of root.items) {
    const key = String((item.key as { value?: unknown } | null)?.value ?? item.key);
    if (key !== 'rules' && key !== 'limits')
      throw new PolicyFileError(`unknown top-level key "${key}" (only \`rules:\` and \`limits:\` are read)`);
  }
  const seq = root.get('rules', true);
  if (!isSeq(seq)) throw new PolicyFileError('`rules:` must be a list');
  const known = new Set(opts.services);
  const rules: Rule[] = [];
  seq.items.forEach((node, i) => {
    const line = isNode(node) && node.range ? lines.linePos(node.range[0]).line : undefined;
    const where = `rule ${i + 1} (rules[${i}]${line === undefined ? '' : `, line ${line}`})`;
    const value: unknown = isNode(node) ? node.toJSON() : null;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new PolicyFileError(`${where}: must be a mapping of matchers and an effect`);
    }
    const parsed = ruleSchema.safeParse(value);
    if (!parsed.success) throw new PolicyFileError(`${where}: ${describe(parsed.error)}`);
    const rule = parsed.data;
    if (rule.tool !== undefined && rule.method !== undefined && !list(rule.method).includes('tools/call')) {
      throw new PolicyFileError(
        `${where}: tool only matches method tools/call, but method is ${list(rule.method).join(', ')}`,
      );
    }
    for (const s of list(rule.service)) {
      if (!known.has(s)) {
        throw new PolicyFileError(
          `${where}: service "${s}" is not one of GATEWAY_SERVICES (${opts.services.join(', ')})`,
        );
      }
    }
    rules.push(rule);
  });
  return { rules, limits: parseLimits(root.get('limits', true), lines, known, opts.services) };
}

function parseLimits(
  seq: unknown,
  lines: LineCounter,
  known: ReadonlySet<string>,
  services: readonly string[],
): Limit[] {
  if (seq === undefined || seq === null) return [];
  if (!isSeq(seq)) throw new PolicyFileError('`limits:` must be a list');
  const limits: Limit[] = [];
  const seen = new Map<string, number>();
  seq.items.forEach((node, i) => {
    const line = isNode(node) && node.range ? lines.linePos(node.range[0]).line : undefined;
    const where = `limit ${i + 1} (limits[${i}]${line === undefined ? '' : `, line ${line}`})`;
    const value: unknown = isNode(node) ? node.toJSON() : null;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new PolicyFileError(`${where}: must be a mapping of per, rate and optional service and tool`);
    }
    const parsed = limitSchema.safeParse(value);
    if (!parsed.success) throw new PolicyFileError(`${where}: ${describe(parsed.error)}`);
    const limit = parsed.data;
    for (const s of list(limit.service)) {
      if (!known.has(s)) {
        throw new PolicyFileError(
          `${where}: service "${s}" is not one of GATEWAY_SERVICES (${services.join(', ')})`,
        );
      }
    }
    // Two equal limits would count every request twice against one counter.
    const identity = JSON.stringify([limit.service, limit.tool, limit.per, limit.rate]);
    const twin = seen.get(identity);
    if (twin !== undefined) throw new PolicyFileError(`${where}: the same limit as limit ${twin + 1}`);
    seen.set(identity, i);
    limits.push(limit);
  });
  return limits;
}

function list<T>(v: T | readonly T[] | undefined): readonly T[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v as T];
}

function describe(error: z.ZodError): string {
  const issue = error.issues[0]!;
  if (issue.code === 'unrecognized_keys') return `unknown key ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p))).join('.');
  if (issue.code === 'invalid_type' && issue.input === undefined) return `${path} is required`;
  return path === '' || path === 'effect' ? issue.message : `${path}: ${issue.message}`;
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.trim();
}
