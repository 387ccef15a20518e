import type { CallToolResult } from '@modelcontextprotocol/server';
import { isDatabaseUnavailable } from '../../lib/db.ts';
import type { Logger } from '../../lib/logger.ts';

// Failures of a tool call. Inside MCP they are tool errors (`isError: true`), not HTTP statuses: the
// connector shows them to the model, which can react (retry, ask an admin). `status` is the HTTP status the
// same refusal would carry outside MCP, kept in the body so clients can branch on it.

export class ToolError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status: number) {
    super(message);
    this.name = 'ToolError';
    this.code = code;
    this.status = status;
  }
}

/** A dependency (database, Microsoft Graph) is down: the call degrades to this error, never a crash or 5xx. */
export class DependencyUnavailableError extends ToolError {
  readonly dependency: string;
  constructor(dependency: string, message: string) {
    super(`${dependency}_unavailable`, message, 503);
    this.dependency = dependency;
  }
}

export interface ToolErrorBody {
  error: { code: string; message: string; status: number };
}

function errorResult(body: ToolErrorBody): CallToolResult {
  // No structuredContent: clients validate it against the tool's output schema even on errors.
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}

/** The one place a failed tool call becomes its result. */
export function toolErrorResult(err: unknown, log: Logger): CallToolResult {
  let e: ToolError | undefined;
  if (err instanceof ToolError) e = err;
  else if (isDatabaseUnavailable(err)) {
    e = new DependencyUnavailableError(
      'database',
      'the database is unavailable; nothing was done, retry shortly',
    );
  }
  if (e) {
    if (e instanceof DependencyUnavailableError) {
      log.warn(
        { code: e.code, reason: e.message, cause: err === e ? undefined : (err as Error).message },
        'tool degraded',
      );
    } else {
      log.warn({ code: e.code, reason: e.message }, 'tool refused');
    }
    return errorResult({ error: { code: e.code, message: e.message, status: e.status } });
  }
  log.error({ err }, 'tool failed');
  return errorResult({ error: { code: 'internal_error', message: 'internal error', status: 500 } });
}
