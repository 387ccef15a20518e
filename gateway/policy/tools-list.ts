import { StringDecoder } from 'node:string_decoder';

// tools/list answers narrowed to the tools the caller may call: the upstream's JSON-RPC response is rewritten,
// whether it comes as one JSON body or as a server-sent event stream (streamable HTTP lets a server answer a
// POST either way). Only messages carrying `result.tools` change; an entry without a string `name` is left out
// (it could not be checked).

/** May the caller call this tool? */
export type ToolFilter = (name: string) => boolean;

/**
 * Marks a filter that only reads the names (the per-tool metrics learning what the upstream lists) and keeps
 * every tool: an answer it cannot read is relayed unread rather than refused.
 */
export const LEARN_ONLY: unique symbol = Symbol('learn-only');

export function isLearnOnly(filter: ToolFilter): boolean {
  return (filter as ToolFilter & { [LEARN_ONLY]?: boolean })[LEARN_ONLY] === true;
}

/** `inner` (the policy's filter), or keep-all, that also tells `seen` every name the answer lists. */
export function learningFilter(seen: (name: string) => void, inner: ToolFilter | undefined): ToolFilter {
  if (inner !== undefined) {
    return (name) => {
      seen(name);
      return inner(name);
    };
  }
  const keepAll: ToolFilter = (name) => {
    seen(name);
    return true;
  };
  return Object.assign(keepAll, { [LEARN_ONLY]: true });
}

function narrowMessage(msg: unknown, keep: ToolFilter): boolean {
  if (msg === null || typeof msg !== 'object') return false;
  const result = (msg as { result?: unknown }).result;
  if (result === null || typeof result !== 'object') return false;
  const tools = (result as { tools?: unknown }).tools;
  if (!Array.isArray(tools)) return false;
  const kept = tools.filter((t: unknown) => {
    const name = t !== null && typeof t === 'object' ? (t as { name?: unknown }).name : undefined;
    return typeof name === 'string' && keep(name);
  });
  // Nothing left out: the answer is relayed exactly as it came.
  if (kept.length === tools.length) return false;
  (result as { tools: unknown[] }).tools = kept;
  return true;
}

/** A JSON response body, narrowed; undefined when it is no tools/list result (then it is relayed as it came). */
export function narrowJsonBody(body: string, keep: ToolFilter): string | undefined {
  let msg: unknown;
  try {
    msg = JSON.parse(body);
  } catch {
    return undefined;
  }
  let changed = false;
  if (Array.isArray(msg)) for (const m of msg) changed = narrowMessage(m, keep) || changed;
  else changed = narrowMessage(msg, keep);
  return changed ? JSON.stringify(msg) : undefined;
}

/**
 * An SSE stream narrowed event by event, as it arrives: each complete event is passed on at once (rewritten
 * when its data is a tools/list result), so the stream stays a stream.
 */
export class SseToolsNarrower {
  readonly #keep: ToolFilter;
  readonly #decoder = new StringDecoder('utf8');
  #pending = '';
  #lines: string[] = [];
  #data: string[] = [];

  constructor(keep: ToolFilter) {
    this.#keep = keep;
  }

  /** Returns what can be sent on now ('' while an event is incomplete). */
  push(chunk: Buffer): string {
    return this.#consume(this.#pending + this.#decoder.write(chunk), false);
  }

  /** The rest at the end of the stream (an unterminated last event is passed on as it came). */
  end(): string {
    const out = this.#consume(this.#pending + this.#decoder.end(), true);
    const rest = this.#lines.length > 0 ? `${this.#lines.join('\n')}\n` : '';
    this.#lines = [];
    this.#data = [];
    return out + rest;
  }

  #consume(text: string, final: boolean): string {
    let out = '';
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // A CR at the very end may be the first half of a CRLF split across chunks.
      if (c === 13 && i === text.length - 1 && !final) break;
      const line = text.slice(start, i);
      if (c === 13 && text.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
      out += this.#line(line);
    }
    this.#pending = text.slice(start);
    if (final && this.#pending !== '') {
      this.#lines.push(this.#pending);
      this.#pending = '';
    }
    return out;
  }

  #line(line: string): string {
    if (line !== '') {
      this.#lines.push(line);
      if (line.startsWith('data:'))
        this.#data.push(line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5));
      return '';
    }
    // A blank line ends the event.
    const lines = this.#lines;
    const data = this.#data;
    this.#lines = [];
    this.#data = [];
    if (lines.length === 0) return '\n';
    const narrowed = data.length > 0 ? narrowJsonBody(data.join('\n'), this.#keep) : undefined;
    if (narrowed === undefined) return `${lines.join('\n')}\n\n`;
    const kept = lines.filter((l) => !l.startsWith('data:'));
    return `${[...kept, `data: ${narrowed}`].join('\n')}\n\n`;
  }
}
