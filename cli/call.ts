import type { Client } from '@modelcontextprotocol/client';
import { CliError } from './client/errors.ts';
import type { Io } from './client/io.ts';
import { withService } from './client/mcp.ts';
import type { ClientConfig } from './config.ts';

export interface CallArgs {
  service: string;
  tool: string;
  /** The tool's arguments as a JSON object, as typed on the command line. */
  json: string | undefined;
}

/**
 * `platform call <service> <tool> [json-args]`: one MCP tool call through the gateway with the user's token.
 * Prints structured content as JSON, else the text content; a tool error goes to stderr with a non-zero exit.
 * A tool the service does not have is answered with the list of the tools it has.
 */
export async function call(config: ClientConfig, args: CallArgs, io: Io): Promise<void> {
  const toolArgs = parseArguments(args.json);
  const result = await withService(config, args.service, io, async (client) => {
    let r: ToolResult;
    try {
      r = (await client.callTool({ name: args.tool, arguments: toolArgs })) as ToolResult;
    } catch (err) {
      // A JSON-RPC error (the SDK's "tool not found" among them): say which tools exist when that is why.
      await unknownTool(client, args);
      throw err;
    }
    if (r.isError === true) await unknownTool(client, args);
    return r;
  });
  const rendered = render(result);
  if (result.isError === true) {
    throw new CliError(
      'CALL_FAILED',
      `${args.service}/${args.tool} failed: ${rendered || 'the tool reported an error'}`,
    );
  }
  if (rendered) io.out(rendered);
}

/** Throws "unknown tool" with the service's tool names when `args.tool` is not among them. */
async function unknownTool(client: Client, args: CallArgs): Promise<void> {
  let names: string[];
  try {
    names = (await client.listTools()).tools.map((t) => t.name);
  } catch {
    return; // the original failure is the better message
  }
  if (names.includes(args.tool)) return;
  throw new CliError(
    'CALL_FAILED',
    `${args.service} has no tool "${args.tool}"; its tools: ${names.join(', ') || '(none)'} (see \`platform tools ${args.service}\`)`,
  );
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
      { exitCode: 2 },
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
