// How deeply a JSON text nests, checked on the raw bytes before anything parses it. Deep nesting is cheap to
// send and expensive (or fatal: stack overflows in recursive converters) to process, so the gateway and the
// tool servers refuse bodies nested deeper than MAX_JSON_DEPTH with a 400 before any JSON.parse.

/** The deepest nesting of objects and arrays a request body may have (the contract's bound). */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/**
 * Whether `body` nests objects/arrays deeper than `max`. One linear pass over the bytes that stops at the first
 * level past `max`; brackets inside strings (escapes respected) do not count. UTF-8 continuation bytes are never
 * ASCII, so scanning bytes is exact. It does not validate the JSON: whatever parses it later still does.
 */
export function jsonTooDeep(body: Uint8Array, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = body.length;
  for (let i = 0; i < n; i++) {
    const c = body[i]!;
    if (c === QUOTE) {
      // Skip the string: to the next quote not preceded by an odd number of backslashes.
      for (i++; i < n; i++) {
        const s = body[i]!;
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}
