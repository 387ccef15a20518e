// The gateway's route table, as data: what the dispatcher (app.ts) reads. Compiled once per configured service
// set into two maps, so a request's route is found with at most two map look-ups, however many services.

export const METADATA_PATH = '/.well-known/oauth-protected-resource';

/** The handlers the table names; app.ts implements them. */
export type PublicHandlerName = 'health' | 'live' | 'ready' | 'metadata' | 'serviceHealth';
export type ProtectedHandlerName = 'proxy';

export type RouteSpec = {
  /** The methods it answers; `*`: any. */
  methods: readonly string[] | '*';
  /**
   * An exact path; `:service` stands for each configured service's name; a final `/*` matches the service's
   * prefix and everything under it (only as `/:service/*`).
   */
  path: string;
} & (
  | {
      access: 'public';
      handler: PublicHandlerName;
    } /** Bearer required: Origin, declared size and the token are checked before the handler runs. */
  | { access: 'protected'; handler: ProtectedHandlerName }
);

const READ = ['GET', 'HEAD'];

/** docs/gateway.md § Routes. Exact paths win over the service prefix; a method an exact path does not take falls
 * through to the prefix when there is one (`POST /<service>/health` is a bearer request like any other). */
export const GATEWAY_ROUTES: readonly RouteSpec[] = [
  { methods: READ, path: '/health', access: 'public', handler: 'health' },
  // Liveness and readiness (lib/health.ts): readiness asks for the revocation mirror in sync and the key sets.
  { methods: READ, path: '/health/live', access: 'public', handler: 'live' },
  { methods: READ, path: '/health/ready', access: 'public', handler: 'ready' },
  // RFC 9728 §3.1 path-inserted metadata, for clients that look there before reading WWW-Authenticate.
  { methods: READ, path: `${METADATA_PATH}/:service`, access: 'public', handler: 'metadata' },
  { methods: READ, path: `${METADATA_PATH}/:service/mcp`, access: 'public', handler: 'metadata' },
  { methods: READ, path: `/:service${METADATA_PATH}`, access: 'public', handler: 'metadata' },
  // The tool server's liveness, proxied without identity.
  { methods: READ, path: '/:service/health', access: 'public', handler: 'serviceHealth' },
  { methods: '*', path: '/:service', access: 'protected', handler: 'proxy' },
  { methods: '*', path: '/:service/*', access: 'protected', handler: 'proxy' },
];

export interface CompiledRoute<S> {
  spec: RouteSpec;
  /** The service the path names (its per-service context); undefined for `/health`. */
  service: S | undefined;
  /** Matched as the service prefix (`/:service/*`): any path under it, so the path's safety must be checked. */
  prefix: boolean;
  /** The Allow header of a 405. */
  allow: string;
  accepts(method: string): boolean;
}

export interface RouteTable<S> {
  /** The route of `path` (no query), preferring one that takes `method`; undefined: no route (404). */
  match(method: string, path: string): CompiledRoute<S> | undefined;
}

export function compileRoutes<S>(
  specs: readonly RouteSpec[],
  services: ReadonlyMap<string, S>,
): RouteTable<S> {
  const exact = new Map<string, CompiledRoute<S>>();
  const prefixes = new Map<string, CompiledRoute<S>>();
  const compiled = (spec: RouteSpec, service: S | undefined, prefix: boolean): CompiledRoute<S> => {
    const methods = spec.methods === '*' ? undefined : new Set(spec.methods);
    return {
      spec,
      service,
      prefix,
      allow: spec.methods === '*' ? '*' : spec.methods.join(', '),
      accepts: methods === undefined ? () => true : (m) => methods.has(m),
    };
  };
  for (const spec of specs) {
    const perService = spec.path.includes(':service');
    for (const [name, service] of perService ? services : [['', undefined] as const]) {
      if (spec.path === '/:service/*') {
        prefixes.set(name, compiled(spec, service, true));
        continue;
      }
      if (spec.path.includes('*')) throw new Error(`route ${spec.path}: only /:service/* may end in /*`);
      const path = spec.path.replace(':service', name);
      if (exact.has(path)) throw new Error(`route ${spec.path}: ${path} is already routed`);
      exact.set(path, compiled(spec, service, false));
    }
  }
  const prefixOf = (path: string): CompiledRoute<S> | undefined => {
    const end = path.indexOf('/', 1);
    return prefixes.get(end < 0 ? path.slice(1) : path.slice(1, end));
  };
  return {
    match(method, path) {
      const route = exact.get(path);
      if (route === undefined) return prefixOf(path);
      if (route.accepts(method)) return route;
      return prefixOf(path) ?? route;
    },
  };
}
