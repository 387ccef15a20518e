import type { Exchange, IdpContext } from '../context.ts';
import { InvalidRequestError, MethodNotAllowedError, NotFoundError } from '../errors.ts';
import type { AdminIdentity } from './auth.ts';

// What the admin API's route table, its handlers, the router and the console share: the route and handler
// types and path matching. Kept apart from router.ts so the handlers never import the router that imports them.

export interface AdminRequest {
  ctx: IdpContext;
  x: Exchange;
  admin: AdminIdentity;
  /** The route's `:name` segments, URL-decoded. */
  params: Readonly<Record<string, string>>;
  /** The query: the request's own (API), or the one the console built from its form. */
  query: URLSearchParams;
  /** The JSON object body: read from the request (API), or the console's form turned into one. */
  body(): Promise<Record<string, unknown>>;
}

/** What the audit row says about the action (besides who, when and the action's name). */
export interface AdminAuditNote {
  target?: string;
  /** The user the action concerns, when it concerns one: the audit of that user lists the row. */
  email?: string;
  detail?: Record<string, unknown>;
}

export type AdminResult =
  | { status?: number; body: unknown; audit: AdminAuditNote }
  /** The handler wrote the response itself (streamed exports); the router still writes the audit row. */
  | { sent: true; audit: AdminAuditNote };

export type AdminHandler = (r: AdminRequest) => Promise<AdminResult>;

export interface AdminRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** `/admin/api/users/:email`: a `:name` segment matches one URL-encoded path segment. */
  path: string;
  /** The audit row's `action`. */
  action: string;
  handler: AdminHandler;
}

/** A route table entry with its path compiled: shared by the admin API and the console's own table. */
export interface CompiledPath {
  pattern: RegExp;
  names: string[];
}

export function compilePath(path: string): CompiledPath {
  const names: string[] = [];
  const source = path
    .split('/')
    .map((seg) => {
      if (!seg.startsWith(':')) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(seg.slice(1));
      return '([^/]+)';
    })
    .join('/');
  return { pattern: new RegExp(`^${source}$`), names };
}

/**
 * The route of `method` `pathname` in `table` and its decoded parameters; 404 when no path matches, 405
 * (with the methods that would) when only the method is wrong, 400 for a segment that is not valid
 * percent-encoding.
 */
export function matchRoute<R extends { method: string } & CompiledPath>(
  table: readonly R[],
  method: string,
  pathname: string,
): { route: R; params: Record<string, string> } {
  const matching = table.filter((r) => r.pattern.test(pathname));
  if (matching.length === 0) throw new NotFoundError(`no route ${pathname}`);
  const route = matching.find((r) => r.method === method);
  if (!route) throw new MethodNotAllowedError(matching.map((r) => r.method).join(', '));
  const m = route.pattern.exec(pathname)!;
  const params: Record<string, string> = {};
  route.names.forEach((name, i) => {
    try {
      params[name] = decodeURIComponent(m[i + 1]!);
    } catch {
      throw new InvalidRequestError(`path segment ${name} is not valid percent-encoding`);
    }
    if (CONTROL_CHARACTER.test(params[name]!)) {
      throw new InvalidRequestError(`path segment ${name} must not contain control characters`);
    }
  });
  return { route, params };
}

/** C0 controls (NUL included), DEL and C1 controls: no filter, email or id holds one, and Postgres refuses NUL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the rule is exactly about control characters
const CONTROL_CHARACTER = /[\x00-\x1F\x7F-\x9F]/;

/**
 * The admin API's and the console's query, before any handler sees it: a control character in a name or value
 * is 400 `invalid_request` (a NUL reached Postgres as a 500, and cut an export already streaming).
 */
export function checkQuery(query: URLSearchParams): void {
  for (const [name, value] of query) {
    if (CONTROL_CHARACTER.test(name) || CONTROL_CHARACTER.test(value)) {
      throw new InvalidRequestError('query parameters must not contain control characters');
    }
  }
}
