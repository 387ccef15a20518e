import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CliError, describeError, isUnreachable, LOGIN_HINT } from './client/errors.ts';
import type { Io } from './client/io.ts';
import type { ClientConfig } from './config.ts';
import { accessToken } from './token.ts';

const SERVICE_NAME = /^[a-z][a-z0-9-]{0,31}$/;
const CLIENT_INFO = { name: 'platform-cli', version: '0.1.0' };

export interface CallArgs {
  service: string;
  tool: string;
  /** The tool's arguments as a JSON object, as typed on the command line. */
  json: string | undefined;
}

/**
 * `platform call <service> <tool> [json-args]`: one MCP tool call through the gateway with the user's token.
 * Prints structured content as JSON, else the text content; a tool error goes to stderr with a non-zero exit.
 */
export async function call(config: ClientConfig, args: CallArgs, io: Io): Promise<void> {
  if (!SERVICE_NAME.test(args.service)) {
    throw new CliError('USAGE', `"${args.service}" is not a service name (e.g. platform, mail, deals)`, {
      exitCode: 2,
    });
  }
  const toolArgs = parseArguments(args.json);
  const token = await accessToken(config, io);
  const endpoint = new URL(`${config.gatewayUrl}/${args.service}/mcp`);
  const transport = new StreamableHTTPClientTransport(endpoint, {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client(CLIENT_INFO);
  let result: ToolResult;
  try {
    await client.connect(transport);
    result = (await client.callTool({ name: args.tool, arguments: toolArgs })) as ToolResult;
  } catch (err) {
    throw callError(err, endpoint.href);
  } finally {
    // End the MCP session politely (DELETE), then drop the connection; neither may hide the result.
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
  const rendered = render(result);
  if (result.isError === true) {
    throw new CliError(
      'CALL_FAILED',
      `${args.service}/${args.tool} failed: ${rendered || 'the tool reported an error'}`,
    );
  }
  if (rendered) io.out(rendered);
}

function parseArguments(json: string | undefined): Record<string, unknown> {
  if (json === undefined || json.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new CliError(
      'USAGE',
      `json-args is not valid JSON (${(err as Error).message}); e.g. '{"deal_id": "D-1"}'`,
      {
        exitCode: 2,
      },
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CliError('USAGE', `json-args must be a JSON object, e.g. '{"deal_id": "D-1"}'`, {
      exitCode: 2,
    });
  }
  return value as Record<string, unknown>;
}

type ContentItem = { type: string; text?: unknown };
/** The current result shape; the SDK's type also admits the pre-2024-11 `toolResult` form, not used here. */
type ToolResult = { content?: unknown; structuredContent?: unknown; isError?: unknown };

/** Structured content is the machine-readable result (JSON for scripts); text content is for people. */
function render(result: ToolResult): string {
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return JSON.stringify(result.structuredContent, null, 2);
  }
  const items = Array.isArray(result.content) ? (result.content as ContentItem[]) : [];
  return items
    .map((c) => (c.type === 'text' && typeof c.text === 'string' ? c.text : JSON.stringify(c)))
    .join('\n');
}

/** The gateway's error body (`{"error":{"code","message","context":{"reason"}}}`), summarised in one line. */
function callError(err: unknown, endpoint: string): CliError {
  if (err instanceof StreamableHTTPError && err.code !== undefined && err.code > 0) {
    const body = /^[^{]*(\{.*\})\s*$/s.exec(err.message)?.[1];
    let detail = err.message;
    try {
      const parsed = body
        ? (JSON.parse(body) as { error?: { code?: string; message?: string; context?: { reason?: string } } })
        : {};
      const e = parsed.error;
      if (e?.code)
        detail = `${e.code}${e.message ? `: ${e.message}` : ''}${e.context?.reason ? ` (${e.context.reason})` : ''}`;
    } catch {
      // not the gateway's JSON body: keep the transport's message
    }
    const hint = err.code === 401 ? `; ${LOGIN_HINT}` : '';
    return new CliError('CALL_FAILED', `${endpoint} answered ${err.code}: ${detail}${hint}`, { cause: err });
  }
  if (err instanceof CliError) return err;
  if (isUnreachable(err)) {
    return new CliError('UNREACHABLE', `cannot reach the gateway at ${endpoint}: ${describeError(err)}`, {
      cause: err,
    });
  }
  return new CliError('CALL_FAILED', `${endpoint}: ${describeError(err)}`, { cause: err });
}
