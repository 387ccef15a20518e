/**
 * A failure the user can act on: printed as one line (`platform: <message>`) with its exit code, never with a
 * stack. `code` is stable so tests and scripts need not match message text.
 */
export class CliError extends Error {
  readonly code: CliErrorCode;
  readonly exitCode: number;
  constructor(code: CliErrorCode, message: string, opts: { exitCode?: number; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = 'CliError';
    this.code = code;
    this.exitCode = opts.exitCode ?? 1;
  }
}

export type CliErrorCode =
  /** No credentials file, or one that cannot be used. */
  | 'NOT_LOGGED_IN'
  /** The issuer refused the refresh token (expired, revoked, reused). */
  | 'SESSION_EXPIRED'
  /** The sign-in in the browser did not complete: error callback, state or issuer mismatch, timeout. */
  | 'LOGIN_FAILED'
  /** The issuer or gateway could not be reached or answered something unusable. */
  | 'UNREACHABLE'
  /** A wrong argument on the command line. */
  | 'USAGE'
  /** The tool ran and reported an error, or the gateway refused the call. */
  | 'CALL_FAILED'
  /** `platform token --proof` for a token that is not bound to the stored key. */
  | 'NOT_BOUND';

export const LOGIN_HINT = 'run `platform login`';

/** One readable line for a failed request: fetch hides the socket error (refused, not found) in its cause. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return 'the request timed out';
  let root: Error = err;
  for (let i = 0; i < 5 && root.cause instanceof Error; i++) root = root.cause;
  const code = (root as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return 'connection refused (is it running?)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (root !== err && root.message) return `${err.message}: ${root.message}`;
  return err.message;
}

/** True when `describeError` found that nothing answered. */
export function isUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return true;
  let root: Error = err;
  for (let i = 0; i < 5 && root.cause instanceof Error; i++) root = root.cause;
  const code = (root as NodeJS.ErrnoException).code;
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'EAI_AGAIN' ||
    code === 'ECONNRESET' ||
    code === 'ETIMEDOUT'
  );
}
