import { sendJson } from '../../lib/http.ts';
import type { Endpoint, Exchange, IdpContext } from '../context.ts';
import { type AdminIdentity, authenticateAdmin } from './auth.ts';
import { readJsonObject } from './body.ts';
import { type AdminResult, checkQuery, compilePath, matchRoute } from './route-table.ts';
import { adminRoutes } from './routes.ts';

const compiled = adminRoutes.map((r) => ({ ...r, ...compilePath(r.path) }));

/**
 * The one way an administrative read or action runs, for the bearer-token API and the console alike: match
 * the route, run its handler, write the admin audit row (who, through which client, what, the answer).
 * Errors propagate unchanged; each caller turns them into its own kind of response (JSON or a page).
 */
export async function runAdmin(
  ctx: IdpContext,
  x: Exchange,
  admin: AdminIdentity,
  call: {
    method: string;
    path: string;
    query?: URLSearchParams;
    body?: () => Promise<Record<string, unknown>>;
  },
): Promise<AdminResult & { action: string }> {
  const { route, params } = matchRoute(compiled, call.method, call.path);
  if (call.query) checkQuery(call.query);
  const result = await route.handler({
    ctx,
    x,
    admin,
    params,
    query: call.query ?? new URLSearchParams(),
    body: call.body ?? (() => readJsonObject(x)),
  });
  await ctx.adminAudit.record({
    actorEmail: admin.email,
    actorSub: admin.sub,
    actorClientId: admin.clientId,
    action: route.action,
    target: result.audit.target,
    targetEmail: result.audit.email,
    detail: result.audit.detail,
    requestId: x.requestId,
  });
  x.log.info(
    { admin: admin.email, via: admin.clientId, action: route.action, target: result.audit.target },
    'admin action',
  );
  return { ...result, action: route.action };
}

/**
 * `/admin/api/*`: authenticate first (so nothing, not even which routes exist, is answered to a caller
 * without an admin token), then run the route (runAdmin) and answer JSON. `Server-Timing: app;dur=<ms>` is
 * the time from the request's arrival to the answer (authentication, handler, audit row): what an operator
 * compares against the proxy's timings, and what bench/admin-audit.ts measures.
 */
export const adminApi: Endpoint = async (ctx, x) => {
  const started = process.hrtime.bigint();
  const admin = await authenticateAdmin(ctx, x);
  const result = await runAdmin(ctx, x, admin, {
    method: x.req.method ?? 'GET',
    path: x.url.pathname,
    query: x.url.searchParams,
  });
  if ('sent' in result) return;
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  sendJson(x.res, result.status ?? 200, result.body, {
    'cache-control': 'no-store',
    'server-timing': `app;dur=${ms.toFixed(2)}`,
  });
};
