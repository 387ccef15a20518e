import { startHttpsServer, type TestCa, type TestHttpsServer } from './tls.ts';

export interface DocumentServer extends TestHttpsServer {
  /** `https://localhost:<port>` */
  origin: string;
  /** The client_id naming the document at `/<name>.json` (every such path serves one). */
  clientId(name: string): string;
  /** Where the documents send the browser back: a URL on the documents' own host, as an attacker's would be. */
  callback: string;
}

/**
 * An https server on localhost (the test CA's certificate) serving a valid Client ID Metadata Document at
 * every `/<name>.json`: its client_id is its URL, its one redirect URI `https://localhost:<port>/cb`.
 * An IdP reaches it with PLATFORM_CIMD_ALLOWED_HOSTS=localhost:<port> and PLATFORM_CIMD_CA_FILE=<ca file>.
 */
export async function startDocumentServer(
  ca: TestCa,
  doc: (clientId: string, origin: string) => Record<string, unknown> = () => ({}),
): Promise<DocumentServer> {
  const server = await startHttpsServer(ca, (req, res) => {
    const origin = `https://${req.headers.host}`;
    const clientId = `${origin}${req.url}`;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        client_id: clientId,
        client_name: 'Document Client',
        redirect_uris: [`${origin}/cb`],
        token_endpoint_auth_method: 'none',
        ...doc(clientId, origin),
      }),
    );
  });
  const origin = `https://localhost:${server.port}`;
  return Object.assign(server, {
    origin,
    clientId: (name: string) => `${origin}/${name}.json`,
    callback: `${origin}/cb`,
  });
}
