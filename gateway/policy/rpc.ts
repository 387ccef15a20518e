// What the policy needs to know of a request: its JSON-RPC method(s) and, for tools/call, the tool name.
// Read from the body (the gateway has it whole before deciding); the MCP 2026-07-28 `Mcp-Method`/`Mcp-Name`
// headers are only a copy of it, checked against the body elsewhere, so the body is what decides here.
//
// The common body (one JSON-RPC message whose keys `method`, `params`, `name` and whose method and tool name
// are plain ASCII without escapes) is read by scanCall: one pass over the bytes that checks the whole text
// against the JSON grammar and keeps only those two strings, with JSON.parse's rule for repeated keys (the last
// wins). It builds no object tree, which is most of JSON.parse's cost per request. Anything else (a batch, an
// escape or a non-ASCII byte where it matters, any text that is not JSON) returns undecided, and JSON.parse
// decides as before: the scan answers exactly what JSON.parse would, or nothing.

export interface RpcCall {
  /** undefined: not a JSON-RPC request (a response, a GET stream, a body that is not JSON). */
  method: string | undefined;
  /** The `params.name` of a tools/call. */
  tool: string | undefined;
}

const NO_CALL: readonly RpcCall[] = Object.freeze([Object.freeze({ method: undefined, tool: undefined })]);

/** The calls a request body makes: one for a message, one per message of a (pre-2025-06-18) batch. */
export function rpcCalls(body: Buffer | undefined): readonly RpcCall[] {
  if (body === undefined || body.length === 0) return NO_CALL;
  const scanned = scanCall(body);
  if (scanned !== undefined) return scanned;
  let msg: unknown;
  try {
    msg = JSON.parse(body.toString('utf8'));
  } catch {
    return NO_CALL;
  }
  if (Array.isArray(msg)) return msg.length === 0 ? NO_CALL : msg.map(callOf);
  return [callOf(msg)];
}

function callOf(msg: unknown): RpcCall {
  if (msg === null || typeof msg !== 'object') return { method: undefined, tool: undefined };
  const { method, params } = msg as { method?: unknown; params?: unknown };
  if (typeof method !== 'string') return { method: undefined, tool: undefined };
  let tool: string | undefined;
  if (method === 'tools/call' && params !== null && typeof params === 'object') {
    const name = (params as { name?: unknown }).name;
    if (typeof name === 'string') tool = name;
  }
  return { method, tool };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SLASH = 0x2f;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/** Deeper than this the scan gives up (JSON.parse decides); the body reader refuses far less already. */
const SCAN_DEPTH = 128;
const KEY_METHOD = [0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64]; // method
const KEY_PARAMS = [0x70, 0x61, 0x72, 0x61, 0x6d, 0x73]; // params
const KEY_NAME = [0x6e, 0x61, 0x6d, 0x65]; // name
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];
const FAIL = -1;

/**
 * The call of a body that is one JSON object, or undefined: undecided (not an object, a batch, not JSON, or a
 * key or value that matters holds an escape or a non-ASCII byte). Exported for the tests, which hold it to
 * JSON.parse.
 */
export function scanCall(b: Uint8Array): readonly RpcCall[] | undefined {
  let i = skipWs(b, 0);
  if (b[i] !== OPEN_BRACE) return undefined;
  let method: string | undefined;
  let tool: string | undefined;
  i = skipWs(b, i + 1);
  if (b[i] !== CLOSE_BRACE) {
    for (;;) {
      if (b[i] !== QUOTE) return undefined;
      const keyStart = i + 1;
      i = scanString(b, i);
      if (i < 0 || !plain) return undefined;
      const keyEnd = i - 1;
      i = skipWs(b, i);
      if (b[i] !== COLON) return undefined;
      i = skipWs(b, i + 1);
      if (equals(b, keyStart, keyEnd, KEY_METHOD)) {
        if (b[i] === QUOTE) {
          const start = i + 1;
          i = scanString(b, i);
          if (i < 0 || !plain) return undefined;
          method = ascii(b, start, i - 1);
        } else {
          method = undefined;
          i = scanValue(b, i, 1);
        }
      } else if (equals(b, keyStart, keyEnd, KEY_PARAMS)) {
        tool = undefined;
        if (b[i] === OPEN_BRACE) {
          i = scanParams(b, i);
          if (i < 0) return undefined;
          tool = paramsName;
        } else {
          i = scanValue(b, i, 1);
        }
      } else {
        i = scanValue(b, i, 1);
      }
      if (i < 0) return undefined;
      i = skipWs(b, i);
      if (b[i] === COMMA) {
        i = skipWs(b, i + 1);
        continue;
      }
      if (b[i] !== CLOSE_BRACE) return undefined;
      break;
    }
  }
  if (skipWs(b, i + 1) !== b.length) return undefined;
  if (method === undefined) return NO_CALL;
  return [{ method, tool: method === 'tools/call' ? tool : undefined }];
}

/** Set by scanParams: the last string `name` of the params object just scanned (undefined: none). */
let paramsName: string | undefined;

/** `params` when it is an object: its `name`, as JSON.parse would leave it (the last one). */
function scanParams(b: Uint8Array, i: number): number {
  let name: string | undefined;
  i = skipWs(b, i + 1);
  if (b[i] !== CLOSE_BRACE) {
    for (;;) {
      if (b[i] !== QUOTE) return FAIL;
      const keyStart = i + 1;
      i = scanString(b, i);
      if (i < 0 || !plain) return FAIL;
      const keyEnd = i - 1;
      i = skipWs(b, i);
      if (b[i] !== COLON) return FAIL;
      i = skipWs(b, i + 1);
      if (equals(b, keyStart, keyEnd, KEY_NAME)) {
        if (b[i] === QUOTE) {
          const start = i + 1;
          i = scanString(b, i);
          if (i < 0 || !plain) return FAIL;
          name = ascii(b, start, i - 1);
        } else {
          name = undefined;
          i = scanValue(b, i, 2);
        }
      } else {
        i = scanValue(b, i, 2);
      }
      if (i < 0) return FAIL;
      i = skipWs(b, i);
      if (b[i] === COMMA) {
        i = skipWs(b, i + 1);
        continue;
      }
      if (b[i] !== CLOSE_BRACE) return FAIL;
      break;
    }
  }
  paramsName = name;
  return i + 1;
}

/** Any JSON value starting at i (no leading whitespace): the index after it, or FAIL. */
function scanValue(b: Uint8Array, i: number, depth: number): number {
  const c = b[i];
  if (c === QUOTE) return scanString(b, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    if (depth >= SCAN_DEPTH) return FAIL;
    const close = c === OPEN_BRACE ? CLOSE_BRACE : CLOSE_BRACKET;
    i = skipWs(b, i + 1);
    if (b[i] === close) return i + 1;
    for (;;) {
      if (c === OPEN_BRACE) {
        if (b[i] !== QUOTE) return FAIL;
        i = scanString(b, i);
        if (i < 0) return FAIL;
        i = skipWs(b, i);
        if (b[i] !== COLON) return FAIL;
        i = skipWs(b, i + 1);
      }
      i = scanValue(b, i, depth + 1);
      if (i < 0) return FAIL;
      i = skipWs(b, i);
      if (b[i] === COMMA) {
        i = skipWs(b, i + 1);
        continue;
      }
      return b[i] === close ? i + 1 : FAIL;
    }
  }
  if (c === 0x74) return literal(b, i, TRUE);
  if (c === 0x66) return literal(b, i, FALSE);
  if (c === 0x6e) return literal(b, i, NULL);
  return scanNumber(b, i);
}

/** Set by scanString: the string just scanned had neither an escape nor a non-ASCII byte. */
let plain = true;

/** A string starting at its opening quote: the index after the closing one, or FAIL. */
function scanString(b: Uint8Array, i: number): number {
  plain = true;
  const n = b.length;
  for (i++; i < n; i++) {
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return FAIL;
    if (c === BACKSLASH) {
      plain = false;
      const e = b[++i];
      if (e === 0x75) {
        // \uXXXX
        for (let k = 0; k < 4; k++) if (!isHex(b[++i])) return FAIL;
      } else if (
        e !== QUOTE &&
        e !== BACKSLASH &&
        e !== SLASH &&
        e !== 0x62 &&
        e !== 0x66 &&
        e !== 0x6e &&
        e !== 0x72 &&
        e !== 0x74
      ) {
        return FAIL;
      }
    } else if (c >= 0x80) {
      plain = false;
    }
  }
  return FAIL;
}

/** RFC 8259 §6: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
function scanNumber(b: Uint8Array, i: number): number {
  if (b[i] === MINUS) i++;
  if (b[i] === ZERO) i++;
  else if (isDigit(b[i])) while (isDigit(b[i])) i++;
  else return FAIL;
  if (b[i] === DOT) {
    i++;
    if (!isDigit(b[i])) return FAIL;
    while (isDigit(b[i])) i++;
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++;
    if (b[i] === PLUS || b[i] === MINUS) i++;
    if (!isDigit(b[i])) return FAIL;
    while (isDigit(b[i])) i++;
  }
  return i;
}

function literal(b: Uint8Array, i: number, word: readonly number[]): number {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return FAIL;
  return i + word.length;
}

function skipWs(b: Uint8Array, i: number): number {
  const n = b.length;
  while (i < n) {
    const c = b[i];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else break;
  }
  return i;
}

function equals(b: Uint8Array, start: number, end: number, word: readonly number[]): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) if (b[start + k] !== word[k]) return false;
  return true;
}

/** Only called on a plain string: every byte ASCII, so one byte is one character. */
function ascii(b: Uint8Array, start: number, end: number): string {
  return Buffer.prototype.latin1Slice.call(b, start, end);
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= 0x39;
}

function isHex(c: number | undefined): boolean {
  return (
    c !== undefined && ((c >= ZERO && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46))
  );
}
