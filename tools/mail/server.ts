import type { ToolService } from '../kit/service.ts';
import { createDelegatedMail } from './delivery/delegated.ts';
import type { MailDelivery } from './delivery/delivery.ts';
import { createGraphDelivery } from './delivery/graph.ts';
import { createGraphClient } from './delivery/graph-client.ts';
import { createOutboxDelivery } from './delivery/outbox.ts';
import { createCalendarEventTool } from './tools/create-calendar-event.ts';
import { sendMailTool } from './tools/send-mail.ts';

export const mailService: ToolService = {
  name: 'mail',
  version: '1.0.0',
  instructions:
    "Mail and calendar in the caller's own mailbox; as_user_email (send-as) is for platform admins only.",
  tables: ['platform.mail_outbox'],
  async start({ config, pool, log }) {
    const delivery: MailDelivery = config.graph
      ? createGraphDelivery(createGraphClient(config.graph, { log: log.child({ component: 'graph' }) }))
      : createOutboxDelivery(pool);
    const connection = config.mailConnection;
    const delegated =
      connection && createDelegatedMail({ connection: connection.name, baseUrl: connection.graphBaseUrl });
    if (connection)
      log.info({ connection: connection.name }, "the caller's own mail goes to Graph as the caller");
    const deps = { delivery, delegated, adminEmails: config.adminEmails };
    return { tools: [sendMailTool(deps), createCalendarEventTool(deps)] };
  },
};
