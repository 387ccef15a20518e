// The mail tool server's send-as, called as a client would: the MCP SDK client with a bearer, through a gateway.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** `send_mail` with `as_user_email: asUser` through the gateway at `gatewayUrl`, holding `token`. */
export async function sendMailAs(gatewayUrl: string, token: string, asUser: string): Promise<CallToolResult> {
  const transport = new StreamableHTTPClientTransport(new URL(`${gatewayUrl}/mail/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'send-as-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    return (await client.callTool({
      name: 'send_mail',
      arguments: { to: 'someone@example.com', subject: 'S', body: 'B', as_user_email: asUser },
    })) as CallToolResult;
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}
