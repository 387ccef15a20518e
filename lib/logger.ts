import pino, { type Logger } from 'pino';

export type { Logger };

// Secrets never reach a log line: credentials travel in these headers and bodies, and the
// authorization response's Location carries the code.
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'res.headers.location',
  '*.access_token',
  '*.refresh_token',
  '*.id_token',
  '*.code',
  '*.code_verifier',
  '*.client_secret',
  '*.token',
  '*.password',
];

export interface LoggerOptions {
  name: string;
  level?: string;
  destination?: pino.DestinationStream;
}

export function createLogger({ name, level = 'info', destination }: LoggerOptions): Logger {
  const opts: pino.LoggerOptions = {
    name,
    level,
    redact: { paths: REDACT, censor: '[redacted]' },
    // `name` says which process wrote the line; `service`, where a line has one, is the MCP service it concerns.
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return pino(opts, destination ?? standardOutput());
}

/**
 * Standard output, written synchronously. pino's default (asynchronous, flushed at exit) never lets a process
 * exit once nobody reads its output any more: the synchronous flush at exit retries a write that fails with
 * EPIPE for ever (seen with a server whose parent died: SIGTERM logged "shutting down", then the process hung).
 * Written synchronously there is nothing left to flush at exit, and a write that fails with EPIPE turns
 * logging off instead. A line costs one write(2) on the request's own turn, the same system call the
 * asynchronous mode makes from a worker thread.
 */
function standardOutput(): pino.DestinationStream {
  const out = pino.destination({ dest: 1, sync: true });
  const onError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') {
      // The reader is gone for good: nothing more can be written, and nothing must wait on it.
      out.write = () => true;
      return;
    }
    out.removeListener('error', onError);
    out.emit('error', err);
  };
  out.on('error', onError);
  return out;
}
