import type { Io } from './client/io.ts';
import { withService } from './client/mcp.ts';
import type { ClientConfig } from './config.ts';

interface PropertySchema {
  type?: unknown;
  description?: unknown;
  enum?: unknown;
  items?: { type?: unknown };
  format?: unknown;
}

interface ListedTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: { properties?: Record<string, unknown>; required?: string[] };
}

/**
 * `platform tools <service>`: the service's tools through the gateway, one block per tool: its name and
 * description, then one line per argument (name, type, required or optional, description).
 * `--json` prints the tools as the server listed them instead.
 */
export async function tools(
  config: ClientConfig,
  args: { service: string; json?: boolean },
  io: Io,
): Promise<void> {
  const listed = await withService(config, args.service, io, async (client) => {
    const out: ListedTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined);
      out.push(...(page.tools as ListedTool[]));
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  });
  if (args.json) {
    io.out(JSON.stringify(listed, null, 2));
    return;
  }
  io.out(listed.map(describeTool).join('\n\n'));
}

export function describeTool(tool: ListedTool): string {
  const lines = [tool.description ? `${tool.name} — ${oneLine(tool.description)}` : tool.name];
  const props = Object.entries(tool.inputSchema.properties ?? {});
  const required = new Set(tool.inputSchema.required ?? []);
  if (props.length === 0) lines.push('  (no arguments)');
  const width = Math.max(0, ...props.map(([n]) => n.length));
  for (const [name, raw] of props) {
    const p = raw as PropertySchema;
    const cells = [`  ${name.padEnd(width)}`, typeOf(p), required.has(name) ? 'required' : 'optional'];
    if (typeof p.description === 'string') cells.push(oneLine(p.description));
    lines.push(cells.join('  '));
  }
  return lines.join('\n');
}

function typeOf(p: PropertySchema): string {
  if (Array.isArray(p.enum)) return p.enum.map((v) => JSON.stringify(v)).join('|');
  const t = Array.isArray(p.type) ? p.type.join('|') : typeof p.type === 'string' ? p.type : 'any';
  if (t === 'array' && typeof p.items?.type === 'string') return `${p.items.type}[]`;
  if (typeof p.format === 'string') return `${t} (${p.format})`;
  return t;
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}
