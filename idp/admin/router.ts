import { sendJson } from '../../lib/http.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { InvalidRequestError, MethodNotAllowedError, NotFoundError } from '../errors.ts';
import { type AdminIdentity, authenticateAdmin } from './auth.ts';
import { adminRoutes } from './routes.ts';

export interface AdminRequest {
  ctx: IdpContext;
  x: Exchange;
  admin: AdminIdentity;
  /** The route's `:name` segments, URL-decoded. */
  params: Readonly<Record<string, string>>;
}

/** What the audit row says about the action (besides who, when and the action's name). */
export interface AdminAuditNote {
  target?: string;
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

interface CompiledRoute extends AdminRoute {
  pattern: RegExp;
  names: string[];
}

function compile(route: AdminRoute): CompiledRoute {
  const names: string[] = [];
  const source = route.path
    .split('/')
    .map((seg) => {
      if (!seg.startsWith(':')) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(seg.slice(1));
      return '([^/]+)';
    })
    .join('/');
  return { ...route, pattern: new RegExp(`^${source}$`), names };
}

const compiled = adminRoutes.map(compile);

/**
 * `/admin/api/*`: authenticate first (so nothing, not even which routes exist, is answered to a caller
 * without an admin token), then match the route, run it, write the admin audit row, answer.
 */
export const adminApi: Endpoint = async (ctx, x) => {
  const admin = await authenticateAdmin(ctx, x.req);
  const matching = compiled.filter((r) => r.pattern.test(x.url.pathname));
  if (matching.length === 0) throw new NotFoundError(`no admin route ${x.url.pathname}`);
  const route = matching.find((r) => r.method === x.req.method);
  if (!route) throw new MethodNotAllowedError(matching.map((r) => r.method).join(', '));
  const m = route.pattern.exec(x.url.pathname)!;
  const params: Record<string, string> = {};
  route.names.forEach((name, i) => {
    try {
      params[name] = decodeURIComponent(m[i + 1]!);
    } catch {
      throw new InvalidRequestError(`path segment ${name} is not valid percent-encoding`);
    }
  });
  const result = await route.handler({ ctx, x, admin, params });
  await ctx.adminAudit.record({
    actorEmail: admin.email,
    actorSub: admin.sub,
    actorClientId: admin.clientId,
    action: route.action,
    target: result.audit.target,
    detail: result.audit.detail,
    requestId: x.requestId,
  });
  x.log.info({ admin: admin.email, action: route.action, target: result.audit.target }, 'admin action');
  if ('sent' in result) return;
  sendJson(x.res, result.status ?? 200, result.body, { 'cache-control': 'no-store' });
};
