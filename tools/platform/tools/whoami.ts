import { z } from 'zod';
import { defineTool } from '../../kit/tool.ts';

/** The caller as the gateway vouched for it: useful to check which account and token a connector uses. */
export const whoami = defineTool({
  name: 'whoami',
  title: 'Who am I',
  description:
    'Returns the signed-in caller: email, subject, issuer kind (platform, entra or service), scope and client id.',
  input: z.object({}),
  output: z.object({
    email: z.string(),
    sub: z.string(),
    issuer: z.enum(['platform', 'entra', 'service']),
    scope: z.string(),
    client_id: z.string(),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run(_args, { identity }) {
    return {
      email: identity.email,
      sub: identity.sub,
      issuer: identity.issuer,
      scope: identity.scope,
      client_id: identity.clientId,
    };
  },
});
