import type { Logger } from '../../lib/logger.ts';
import { ForbiddenToolError, InsufficientScopeError } from '../errors.ts';
import type { GatewayLimits } from '../limits/limits.ts';
import { type Caller, type CompiledPolicy, type CompiledRule, compilePolicy } from './compile.ts';
import { loadPolicyDocument } from './load.ts';
import { type RpcCall, rpcCalls } from './rpc.ts';
import type { Limit } from './schema.ts';
import type { ToolFilter } from './tools-list.ts';

// The per-tool policy as the request path sees it: `check` refuses a request the rules do not allow and, for
// a tools/list, hands back the filter its answer must go through. `PolicyFile` holds the current rules and
// swaps them on reload (SIGHUP): a request in flight keeps the rules it started with.

export interface PolicyCheck {
  /** Throws ForbiddenToolError / InsufficientScopeError; returns a filter when the answer is a tools/list. */
  check(service: string, body: Buffer | undefined, caller: Caller): ToolFilter | undefined;
  /** The same, for calls already known (a 2026-07-28 request's headers, once held to its body). */
  checkCalls(service: string, calls: readonly RpcCall[], caller: Caller): ToolFilter | undefined;
  readonly ruleCount: number;
  /** The file's `limits:`; undefined when it has none. */
  readonly limits: GatewayLimits | undefined;
}

export function createPolicyCheck(policy: CompiledPolicy, limits?: GatewayLimits): PolicyCheck {
  const check: PolicyCheck = {
    ruleCount: policy.ruleCount,
    limits,
    check(service, body, caller) {
      return check.checkCalls(service, rpcCalls(body), caller);
    },
    checkCalls(service, calls, caller) {
      let lists = false;
      for (const call of calls) {
        enforce(policy.decide(service, call.method, call.tool, caller), service, call, caller);
        if (call.method === 'tools/list') lists = true;
      }
      if (!lists) return undefined;
      // Listed: the tools the caller may call, including those that need a scope it can still ask for (the
      // MCP client steps up when it calls one).
      return (name) => {
        const rule = policy.decide(service, 'tools/call', name, caller);
        return rule !== undefined && rule.effect !== 'deny';
      };
    },
  };
  return check;
}

function enforce(rule: CompiledRule | undefined, service: string, call: RpcCall, caller: Caller): void {
  if (rule === undefined) throw new ForbiddenToolError(`no policy rule allows ${what(service, call)}`);
  if (rule.effect === 'deny')
    throw new ForbiddenToolError(`policy rule ${rule.index + 1} denies ${what(service, call)}`);
  if (rule.effect === 'require_scope' && !caller.scopes.includes(rule.requiredScope!)) {
    throw new InsufficientScopeError(rule.requiredScope!);
  }
}

function what(service: string, call: RpcCall): string {
  if (call.tool !== undefined) return `the tool ${call.tool} of ${service}`;
  if (call.method !== undefined) return `${call.method} on ${service}`;
  return `this request to ${service}`;
}

export interface PolicyFileOptions {
  path: string;
  services: readonly string[];
  log: Logger;
  /** Builds the counters of the file's `limits:` (gateway/limits/), at every load. */
  limits?: (limits: readonly Limit[]) => GatewayLimits;
}

/** The policy file's current rules, reloadable. */
export class PolicyFile {
  readonly #opts: PolicyFileOptions;
  #current: PolicyCheck;
  /** Reloads run one after another: two quick SIGHUPs must not let an older read land last. */
  #reloading: Promise<boolean> = Promise.resolve(true);

  private constructor(opts: PolicyFileOptions, current: PolicyCheck) {
    this.#opts = opts;
    this.#current = current;
  }

  /** Loads the file; a bad file throws PolicyFileError (start-up stops). */
  static async load(opts: PolicyFileOptions): Promise<PolicyFile> {
    return new PolicyFile(opts, await read(opts));
  }

  get current(): PolicyCheck {
    return this.#current;
  }

  /** Re-reads the file; a bad file keeps the rules in force and logs one line. Resolves true when swapped. */
  reload(): Promise<boolean> {
    this.#reloading = this.#reloading.then(() => this.#reload());
    return this.#reloading;
  }

  async #reload(): Promise<boolean> {
    const { log, path } = this.#opts;
    try {
      this.#current = await read(this.#opts);
    } catch (err) {
      log.error(
        { policyFile: path },
        `policy not reloaded, the previous rules stay in force: ${(err as Error).message}`,
      );
      return false;
    }
    log.info(
      { policyFile: path, rules: this.#current.ruleCount, limits: this.#current.limits?.count ?? 0 },
      'policy reloaded',
    );
    return true;
  }
}

async function read(opts: PolicyFileOptions): Promise<PolicyCheck> {
  const { rules, limits } = await loadPolicyDocument(opts.path, { services: opts.services });
  const counted = limits.length > 0 && opts.limits ? opts.limits(limits) : undefined;
  return createPolicyCheck(compilePolicy(rules, opts.services), counted);
}
