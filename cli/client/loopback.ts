import { createServer, type ServerResponse } from 'node:http';
import { drain, listen } from '../../lib/lifecycle.ts';

/** One browser redirect to the loopback URI, held open until the caller says how the sign-in ended. */
export interface Callback {
  /** The full callback URL, as the browser requested it (query carries code/state/iss or error). */
  url: URL;
  /** Answers the browser with a plain-text page; the tab is the only place the user looks at that moment. */
  respond(ok: boolean, text: string): void;
}

export interface LoopbackListener {
  /** `http://127.0.0.1:<port>/callback`, the redirect_uri to send. */
  redirectUri: string;
  /** Resolves with the first request to /callback; rejects when `timeoutMs` passes first. */
  next(timeoutMs: number): Promise<Callback>;
  close(): Promise<void>;
}

export class CallbackTimeoutError extends Error {
  constructor(seconds: number) {
    super(`no answer from the browser within ${seconds} s`);
    this.name = 'CallbackTimeoutError';
  }
}

/**
 * The loopback redirect listener of RFC 8252 §7.3: bound to 127.0.0.1 only (never a routable interface) on a
 * port the OS picks, serving one path. Other paths (a browser's favicon request) get 404.
 */
export async function startLoopbackListener(): Promise<LoopbackListener> {
  let deliver: ((cb: Callback) => void) | undefined;
  const pending: Callback[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://127.0.0.1`);
    if (req.method !== 'GET' || url.pathname !== '/callback') {
      page(res, 404, 'Not found.\n');
      return;
    }
    url.host = `127.0.0.1:${port}`;
    let answered = false;
    const cb: Callback = {
      url,
      respond(ok, text) {
        if (answered) return;
        answered = true;
        page(res, ok ? 200 : 400, `${text}\n`);
      },
    };
    if (deliver) deliver(cb);
    else pending.push(cb);
  });
  const { port } = await listen(server, 0, '127.0.0.1');
  return {
    redirectUri: `http://127.0.0.1:${port}/callback`,
    next(timeoutMs) {
      const queued = pending.shift();
      if (queued) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          deliver = undefined;
          reject(new CallbackTimeoutError(Math.round(timeoutMs / 1000)));
        }, timeoutMs);
        deliver = (cb) => {
          clearTimeout(timer);
          deliver = undefined;
          resolve(cb);
        };
      });
    },
    close: () => drain(server, 1000),
  };
}

function page(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    // The page shows nothing but text; it never needs to be framed or to run anything.
    'content-security-policy': "default-src 'none'",
    'x-content-type-options': 'nosniff',
    connection: 'close',
  });
  res.end(text);
}
