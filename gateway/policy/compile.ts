import type { Issuer, Rule } from './schema.ts';

// The rules compiled for the hot path. Everything a rule says about the request (service, JSON-RPC method,
// tool) is resolved once, at load: for every (service, method, tool) the rules could see, the list of rules
// that can match it, in file order, cut after the first one that matches every caller. A decision is then two
// or three map look-ups and a walk over the few rules whose caller matchers (email, issuer, scope) are left.

/** What the policy knows of the verified caller. */
export interface Caller {
  /** Trimmed, lowercased; '' when the token carries none. */
  email: string;
  kind: Issuer;
  scopes: readonly string[];
  /** The client acting for the user (a delegated token's outermost `act.sub`); '' or absent when none. */
  actor?: string;
}

export interface CompiledRule {
  /** 0-based position in the file (logged with a refusal, so an operator finds the rule). */
  readonly index: number;
  readonly effect: Rule['effect'];
  /** For `require_scope`. */
  readonly requiredScope: string | undefined;
  matches(caller: Caller): boolean;
}

interface MethodIndex {
  tools: ReadonlyMap<string, readonly CompiledRule[]>;
  otherTool: readonly CompiledRule[];
}

interface ServiceIndex {
  methods: ReadonlyMap<string, MethodIndex>;
  otherMethod: MethodIndex;
}

const TOOLS_CALL = 'tools/call';
const ANY = Symbol('any');
type Key = string | typeof ANY;

export interface CompiledPolicy {
  readonly ruleCount: number;
  /** The first rule that matches, or undefined: no rule matches (denied). */
  decide(
    service: string,
    method: string | undefined,
    tool: string | undefined,
    caller: Caller,
  ): CompiledRule | undefined;
}

export function compilePolicy(rules: readonly Rule[], services: readonly string[]): CompiledPolicy {
  const compiled = rules.map(compileRule);
  const methodsNamed = new Set<string>();
  const toolsNamed = new Set<string>();
  for (const r of rules) {
    for (const m of list(r.method)) methodsNamed.add(m);
    for (const t of list(r.tool)) toolsNamed.add(t);
    if (r.tool !== undefined) methodsNamed.add(TOOLS_CALL);
  }
  const index = new Map<string, ServiceIndex>();
  for (const service of services) {
    const candidates = (method: Key, tool: Key) =>
      cut(compiled.filter((_, i) => staticMatch(rules[i]!, service, method, tool)));
    const methodIndex = (method: Key): MethodIndex => {
      const tools = new Map<string, readonly CompiledRule[]>();
      if (method === TOOLS_CALL) for (const t of toolsNamed) tools.set(t, candidates(method, t));
      return { tools, otherTool: candidates(method, ANY) };
    };
    const methods = new Map<string, MethodIndex>();
    for (const m of methodsNamed) methods.set(m, methodIndex(m));
    index.set(service, { methods, otherMethod: methodIndex(ANY) });
  }
  // Decisions remembered per caller object: the gateway's verified-token cache hands the same object to every
  // request of one token, so its next request to the same tool is one look-up. The memo is keyed by the
  // candidate list itself (one frozen array per (service, method, tool) the rules resolve to): no key string is
  // built per request, and made-up tool names all share their method's `otherTool` list, so a caller's memo is
  // bounded by the lists compiled here. A new policy (reload) starts with an empty memo.
  const memo = new WeakMap<Caller, Map<readonly CompiledRule[], CompiledRule | null>>();
  const walk = (candidates: readonly CompiledRule[], caller: Caller): CompiledRule | undefined => {
    for (let i = 0; i < candidates.length; i++) {
      const r = candidates[i]!;
      if (r.matches(caller)) return r;
    }
    return undefined;
  };
  return {
    ruleCount: rules.length,
    decide(service, method, tool, caller) {
      const s = index.get(service);
      if (s === undefined) return undefined;
      const m = (method !== undefined ? s.methods.get(method) : undefined) ?? s.otherMethod;
      const candidates = (tool !== undefined ? m.tools.get(tool) : undefined) ?? m.otherTool;
      if (candidates.length <= 1) return walk(candidates, caller);
      let decisions = memo.get(caller);
      const known = decisions?.get(candidates);
      if (known !== undefined) return known ?? undefined;
      const rule = walk(candidates, caller);
      if (decisions === undefined) {
        decisions = new Map();
        memo.set(caller, decisions);
      }
      decisions.set(candidates, rule ?? null);
      return rule;
    },
  };
}

/** Does the rule's request side (service, method, tool) match? `ANY`: a value no rule names. */
function staticMatch(rule: Rule, service: string, method: Key, tool: Key): boolean {
  if (rule.service !== undefined && !list(rule.service).includes(service)) return false;
  if (rule.method !== undefined && (method === ANY || !list(rule.method).includes(method))) return false;
  // `tool` names the tool of a tools/call; no other request has one.
  if (rule.tool !== undefined && (method !== TOOLS_CALL || tool === ANY || !list(rule.tool).includes(tool))) {
    return false;
  }
  return true;
}

const UNCONDITIONAL = Symbol('unconditional');
type Compiled = CompiledRule & { [UNCONDITIONAL]: boolean };

/** Rules after one that matches every caller can never decide. */
function cut(rules: Compiled[]): readonly CompiledRule[] {
  const i = rules.findIndex((r) => r[UNCONDITIONAL]);
  return Object.freeze(i < 0 ? rules : rules.slice(0, i + 1));
}

function compileRule(rule: Rule, index: number): Compiled {
  const emails = new Set<string>();
  const domains: string[] = [];
  for (const e of list(rule.email)) {
    const v = e.toLowerCase();
    if (v.startsWith('*@')) domains.push(v.slice(1));
    else emails.add(v);
  }
  const anyEmail = rule.email === undefined;
  const issuers = rule.issuer === undefined ? undefined : new Set<Issuer>(list(rule.issuer));
  const scopes =
    rule.scope === undefined
      ? undefined
      : list(rule.scope).flatMap((s) => s.split(' ').filter((x) => x !== ''));
  const checks: Array<(c: Caller) => boolean> = [];
  if (!anyEmail) {
    checks.push((c) => {
      if (c.email === '') return false;
      if (emails.has(c.email)) return true;
      for (const d of domains) if (c.email.endsWith(d)) return true;
      return false;
    });
  }
  if (issuers) checks.push((c) => issuers.has(c.kind));
  if (rule.actor !== undefined) {
    const actors = new Set(list(rule.actor));
    const anyActor = actors.has('*');
    checks.push((c) => !!c.actor && (anyActor || actors.has(c.actor)));
  }
  if (scopes) checks.push((c) => scopes.every((s) => c.scopes.includes(s)));
  const matches =
    checks.length === 0
      ? () => true
      : checks.length === 1
        ? checks[0]!
        : (c: Caller) => {
            for (const check of checks) if (!check(c)) return false;
            return true;
          };
  return {
    index,
    effect: rule.effect,
    requiredScope: rule.effect === 'require_scope' ? rule.required_scope : undefined,
    matches,
    [UNCONDITIONAL]: checks.length === 0,
  };
}

function list<T>(v: T | readonly T[] | undefined): readonly T[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v as T];
}
