import type { IncomingMessage, ServerResponse } from 'node:http';
import { LIVE_PATH, READY_PATH, type ReadinessChecks, sendLive, sendReady } from '../../lib/health.ts';
import { requestId } from '../../lib/http.ts';
import { flatLines, type Logger, lazyChild } from '../../lib/logger.ts';
import type { Tracing } from '../../lib/telemetry/index.ts';
import { mcpRequestInfo, RequestTrace, traceMcp, traceOf } from '../../lib/telemetry/request.ts';
import { MethodNotAllowedError, NotFoundError, respondError } from './errors.ts';
import type { HostGuard } from './host-guard.ts';
import { readAuthenticatedRequest } from './identity.ts';
import type { McpEndpoint } from './mcp.ts';
import type { ProvisioningCheck } from './provisioning.ts';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ToolAppParts {
  /** The service name, which is also the public path prefix (`/<service>/mcp`). */
  service: string;
  /** TOOL_IDENTITY_KEY. */
  identityKey: string;
  hostGuard: HostGuard;
  provisioning: ProvisioningCheck;
  mcp: McpEndpoint;
  /** What `/health/ready` asks (Postgres); absent: nothing (ready whenever live). */
  readiness?: ReadinessChecks;
  /** OpenTelemetry traces (lib/telemetry/); absent: nothing is traced. */
  tracing?: Tracing | undefined;
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request's logger (its lines carry reqId), made the first time a line needs it. */
  log: () => Logger;
  /** Added to the request's log line. */
  logged: { mcp?: 'fast' | 'sdk' };
}

type Endpoint = (x: Exchange) => Promise<void>;

/** Largest JSON-RPC body a tool server reads (the gateway's own limit, 1 MiB by default, is lower). */
const MCP_BODY_LIMIT = 4 * 1024 * 1024;

const health: Endpoint = async ({ res }) => {
  // Liveness only: the start-up probe ran before the port was opened, so "up" already means "DB was reachable".
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': 15,
    'cache-control': 'no-store',
  });
  res.end('{"status":"ok"}');
};

/**
 * A tool server as a request handler; tools/server.ts owns the process side (pool, probe, port, shutdown).
 * The MCP endpoint reads as its steps: host guard, caller from the signed headers, provisioning, MCP.
 */
export function createToolHandler(parts: ToolAppParts, log: Logger): Handler {
  const mcp: Endpoint = async ({ req, res, log: reqLog, logged }) => {
    parts.hostGuard.check(req);
    const { identity, body } = await readAuthenticatedRequest(req, {
      key: parts.identityKey,
      service: parts.service,
      bodyLimit: MCP_BODY_LIMIT,
    });
    const trace = parts.tracing && traceOf(res);
    if (trace) traceMcp(trace, mcpRequestInfo(body), req.headers['mcp-protocol-version']);
    const provisioning = await parts.provisioning(identity, reqLog);
    logged.mcp = await parts.mcp.handle(req, res, { identity, provisioning }, body);
  };

  const live: Endpoint = async ({ res }) => sendLive(res);
  const ready: Endpoint = ({ res }) => sendReady(res, parts.readiness ?? {});

  // The whole surface, in one table. Routes live under /<service>/ because the gateway keeps the prefix.
  const routes = new Map<string, Readonly<Record<string, Endpoint>>>([
    ['/health', { GET: health, HEAD: health }],
    [LIVE_PATH, { GET: live, HEAD: live }],
    [READY_PATH, { GET: ready, HEAD: ready }],
    [`/${parts.service}/health`, { GET: health, HEAD: health }],
    [`/${parts.service}/mcp`, { POST: mcp, GET: mcp, DELETE: mcp }],
  ]);

  // The request line (id, method, path, status, time, how MCP answered) holds flat fields only: written without
  // the redaction pass (lib/logger.ts flatLines).
  const access = flatLines(log);
  return (req, res) => {
    const id = requestId(req);
    // Most calls log only the request line and the `tool call` line, neither through this logger: a child per
    // request was mostly built (its bindings run through the redactor) and dropped.
    const reqLog = lazyChild(log, { reqId: id });
    const started = performance.now();
    res.setHeader('x-request-id', id);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const logged: Exchange['logged'] = {};
    if (parts.tracing) {
      // The gateway's span is the parent (its traceparent); `_meta.traceparent` when called without one.
      new RequestTrace(parts.tracing, req, res, `${req.method} ${routes.has(path) ? path : 'other'}`, {
        'http.request.method': req.method,
        'http.route': routes.has(path) ? path : undefined,
        'platform.service': parts.service,
        'platform.request_id': id,
      });
    }
    res.once('close', () => {
      access.info(
        {
          reqId: id,
          method: req.method,
          path,
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
          ...logged,
        },
        'request',
      );
    });
    const run = async () => {
      const entry = routes.get(path);
      if (!entry) throw new NotFoundError(path);
      const endpoint = req.method ? entry[req.method] : undefined;
      if (!endpoint) throw new MethodNotAllowedError(Object.keys(entry));
      await endpoint({ req, res, log: reqLog, logged });
    };
    run().catch((err: unknown) => respondError(res, err, reqLog(), id, path));
  };
}
