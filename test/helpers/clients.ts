import { createServer } from 'node:http';

/** POST /oauth/register (RFC 7591) with a JSON body; returns status and the parsed answer. */
export async function registerClient(base: string, metadata: Record<string, unknown>) {
  const res = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> & { client_id: string } };
}

/**
 * A native client's loopback redirect target: a real HTTP server on 127.0.0.1 that records every request it
 * gets (the authorization response arrives as its query) and answers with a short page.
 */
export async function startCallbackServer() {
  const hits: URL[] = [];
  const waiters: Array<(u: URL) => void> = [];
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    hits.push(u);
    for (const w of waiters.splice(0)) w(u);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('callback received; you can close this tab');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    hits,
    /** The next request to arrive (or the last one, if it already did after `since` hits). */
    next(since = hits.length): Promise<URL> {
      if (hits.length > since) return Promise.resolve(hits[since]!);
      return new Promise((resolve) => waiters.push(resolve));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
