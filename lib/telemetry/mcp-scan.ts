// What a span names from a raw JSON-RPC request body, read without building it: one validating pass over the
// bytes that keeps the first message's `method`, `id`, `params.name` and `params._meta.traceparent`/`tracestate`
// and skips the rest (a tools/call's arguments are most of the body). It answers exactly what JSON.parse and the
// reads of lib/telemetry/request.ts mcpRequestInfo would (test/telemetry/mcp-scan.test.ts holds the two
// together): a body that is not valid JSON names nothing, and a repeated key counts by its last occurrence.
// Traced requests only: with tracing off nothing calls it.

/** The fields read; undefined: absent, or not of the type a span takes. */
export interface ScannedMcpRequest {
  method: string | undefined;
  id: string | undefined;
  name: string | undefined;
  traceparent: string | undefined;
  tracestate: string | undefined;
}

class Invalid extends Error {}
const INVALID = new Invalid('invalid JSON');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;

const key = (s: string) => Buffer.from(s, 'latin1');
const K_METHOD = key('method');
const K_ID = key('id');
const K_PARAMS = key('params');
const K_NAME = key('name');
const K_META = key('_meta');
const K_TRACEPARENT = key('traceparent');
const K_TRACESTATE = key('tracestate');

/** Value kinds as `value()` reports them. */
const STRING = 1;
const NUMBER = 2;
const OTHER = 3;

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

class Scanner {
  readonly b: Buffer;
  readonly n: number;
  i = 0;
  /** The last string scanned: its content's byte range and whether it holds an escape. */
  s0 = 0;
  s1 = 0;
  escaped = false;
  /** Where the last value scanned started (a number's text). */
  v0 = 0;

  constructor(b: Buffer) {
    this.b = b;
    this.n = b.length;
  }

  ws(): void {
    const { b, n } = this;
    let i = this.i;
    while (i < n) {
      const c = b[i]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    this.i = i;
  }

  expect(c: number): void {
    if (this.b[this.i] !== c) throw INVALID;
    this.i++;
  }

  string(): void {
    const { b, n } = this;
    let i = this.i + 1;
    this.s0 = i;
    this.escaped = false;
    for (;;) {
      if (i >= n) throw INVALID;
      const c = b[i]!;
      if (c === QUOTE) break;
      if (c < 0x20) throw INVALID;
      if (c === BACKSLASH) {
        this.escaped = true;
        const e = b[i + 1];
        if (e === 0x75 /* u */) {
          for (let k = 2; k < 6; k++) if (!isHex(b[i + k] ?? 0)) throw INVALID;
          i += 6;
          continue;
        }
        // " \ / b f n r t
        if (
          e !== QUOTE &&
          e !== BACKSLASH &&
          e !== 0x2f &&
          e !== 0x62 &&
          e !== 0x66 &&
          e !== 0x6e &&
          e !== 0x72 &&
          e !== 0x74
        ) {
          throw INVALID;
        }
        i += 2;
        continue;
      }
      i++;
    }
    this.s1 = i;
    this.i = i + 1;
  }

  /** The last string scanned, decoded as JSON.parse would. */
  text(): string {
    if (!this.escaped) return this.b.toString('utf8', this.s0, this.s1);
    return JSON.parse(this.b.toString('utf8', this.s0 - 1, this.s1 + 1)) as string;
  }

  /** Whether the last string scanned (a key) is `k`. */
  is(k: Buffer): boolean {
    if (this.escaped) return this.text() === k.toString('latin1');
    const len = this.s1 - this.s0;
    if (len !== k.length) return false;
    for (let j = 0; j < len; j++) if (this.b[this.s0 + j] !== k[j]) return false;
    return true;
  }

  number(): void {
    const { b } = this;
    let i = this.i;
    if (b[i] === MINUS) i++;
    if (b[i] === 0x30) i++;
    else if (isDigit(b[i] ?? 0)) while (isDigit(b[i] ?? 0)) i++;
    else throw INVALID;
    if (b[i] === 0x2e /* . */) {
      i++;
      if (!isDigit(b[i] ?? 0)) throw INVALID;
      while (isDigit(b[i] ?? 0)) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45 /* e E */) {
      i++;
      if (b[i] === 0x2b || b[i] === MINUS) i++;
      if (!isDigit(b[i] ?? 0)) throw INVALID;
      while (isDigit(b[i] ?? 0)) i++;
    }
    this.i = i;
  }

  literal(word: string): void {
    for (let k = 0; k < word.length; k++) if (this.b[this.i + k] !== word.charCodeAt(k)) throw INVALID;
    this.i += word.length;
  }

  /** Skips one value (whitespace before it skipped already); its kind. */
  value(): number {
    const c = this.b[this.i];
    this.v0 = this.i;
    switch (c) {
      case QUOTE:
        this.string();
        return STRING;
      case OPEN_BRACE:
        this.object(undefined);
        return OTHER;
      case OPEN_BRACKET:
        this.array();
        return OTHER;
      case 0x74:
        this.literal('true');
        return OTHER;
      case 0x66:
        this.literal('false');
        return OTHER;
      case 0x6e:
        this.literal('null');
        return OTHER;
      default:
        this.number();
        return NUMBER;
    }
  }

  array(): void {
    this.i++;
    this.ws();
    if (this.b[this.i] === CLOSE_BRACKET) {
      this.i++;
      return;
    }
    for (;;) {
      this.ws();
      this.value();
      this.ws();
      if (this.b[this.i] === COMMA) {
        this.i++;
        continue;
      }
      this.expect(CLOSE_BRACKET);
      return;
    }
  }

  /**
   * An object (at `{`). `member`, when given, is called for each key (the scanner just past the key's string
   * and its colon, at the value after whitespace) and returns whether it consumed the value; else it is skipped.
   */
  object(member: ((s: Scanner) => boolean) | undefined): void {
    this.i++;
    this.ws();
    if (this.b[this.i] === CLOSE_BRACE) {
      this.i++;
      return;
    }
    for (;;) {
      this.ws();
      if (this.b[this.i] !== QUOTE) throw INVALID;
      this.string();
      this.ws();
      this.expect(COLON);
      this.ws();
      if (member === undefined || !member(this)) this.value();
      this.ws();
      if (this.b[this.i] === COMMA) {
        this.i++;
        continue;
      }
      this.expect(CLOSE_BRACE);
      return;
    }
  }
}

/**
 * The first message's fields (of a batch, its first element; an empty batch or a first element that is not an
 * object names nothing), or undefined when the body is not valid JSON.
 */
export function scanMcpRequest(body: Buffer): ScannedMcpRequest | undefined {
  const out: ScannedMcpRequest = {
    method: undefined,
    id: undefined,
    name: undefined,
    traceparent: undefined,
    tracestate: undefined,
  };
  const s = new Scanner(body);
  const meta = (m: Scanner): boolean => {
    if (m.is(K_TRACEPARENT)) out.traceparent = m.value() === STRING ? m.text() : undefined;
    else if (m.is(K_TRACESTATE)) out.tracestate = m.value() === STRING ? m.text() : undefined;
    else return false;
    return true;
  };
  const params = (m: Scanner): boolean => {
    if (m.is(K_NAME)) out.name = m.value() === STRING ? m.text() : undefined;
    else if (m.is(K_META)) {
      // The last `_meta` is the one read: what an earlier one said is forgotten.
      out.traceparent = undefined;
      out.tracestate = undefined;
      if (m.b[m.i] === OPEN_BRACE) m.object(meta);
      else m.value();
    } else return false;
    return true;
  };
  const message = (m: Scanner): boolean => {
    if (m.is(K_METHOD)) out.method = m.value() === STRING ? m.text() : undefined;
    else if (m.is(K_ID)) {
      const kind = m.value();
      out.id =
        kind === STRING
          ? m.text()
          : kind === NUMBER
            ? String(Number(m.b.toString('latin1', m.v0, m.i)))
            : undefined;
    } else if (m.is(K_PARAMS)) {
      out.name = undefined;
      out.traceparent = undefined;
      out.tracestate = undefined;
      if (m.b[m.i] === OPEN_BRACE) m.object(params);
      else m.value();
    } else return false;
    return true;
  };
  try {
    s.ws();
    let named = true;
    if (s.b[s.i] === OPEN_BRACE) s.object(message);
    else if (s.b[s.i] === OPEN_BRACKET) {
      // A batch: its first element is read, the others only checked.
      s.i++;
      s.ws();
      if (s.b[s.i] === CLOSE_BRACKET) {
        s.i++;
        named = false;
      } else {
        if (s.b[s.i] === OPEN_BRACE) s.object(message);
        else {
          s.value();
          named = false;
        }
        for (;;) {
          s.ws();
          if (s.b[s.i] === COMMA) {
            s.i++;
            s.ws();
            s.value();
            continue;
          }
          s.expect(CLOSE_BRACKET);
          break;
        }
      }
    } else {
      s.value();
      named = false;
    }
    s.ws();
    if (s.i !== s.n) return undefined;
    return named ? out : { ...out, method: undefined };
  } catch (err) {
    if (err === INVALID || err instanceof RangeError || err instanceof SyntaxError) return undefined;
    throw err;
  }
}
