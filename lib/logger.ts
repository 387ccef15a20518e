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
  return destination ? pino(opts, destination) : pino(opts);
}
