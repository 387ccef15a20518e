import { z } from 'zod';
import { type AnyTool, defineTool } from '../../kit/tool.ts';
import type { DelegatedMail } from '../delivery/delegated.ts';
import type { MailDelivery } from '../delivery/delivery.ts';
import { resolveSender } from '../send-as.ts';

export interface MailToolDeps {
  /** Send-as, and the caller's own mail without a connection: app-only Graph or the outbox. */
  delivery: MailDelivery;
  /** MAIL_UPSTREAM_CONNECTION set: the caller's own mail and events go to Graph as the caller. */
  delegated?: DelegatedMail | undefined;
  adminEmails: readonly string[];
}

const email = z.email().max(320);

export function sendMailTool(deps: MailToolDeps): AnyTool {
  return defineTool({
    name: 'send_mail',
    title: 'Send mail',
    description:
      "Sends an email from the caller's mailbox. Platform admins may set as_user_email to send from another user's mailbox.",
    input: z.object({
      to: z.union([email, z.array(email).min(1).max(100)]).describe('recipient address, or a list of them'),
      subject: z.string().min(1).max(998),
      body: z.string().max(1_000_000).describe('plain text'),
      as_user_email: email.optional().describe('admins only: send from this mailbox'),
    }),
    output: z.object({
      status: z.enum(['sent', 'queued']),
      delivery: z.enum(['graph', 'outbox']),
      from: z.string(),
      send_as: z.boolean(),
      /** Sent as the caller with their connection's delegated token (Graph `/me`), not app-only. */
      delegated: z.boolean().optional(),
      outbox_id: z.string().optional(),
    }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    async run(args, { identity, requestId, log, signal }) {
      const sender = resolveSender(identity, args.as_user_email, deps.adminEmails);
      if (sender.sendAs) log.info({ sendAs: sender.email }, 'admin send-as: mail');
      const mail = {
        from: sender.email,
        to: typeof args.to === 'string' ? [args.to] : args.to,
        subject: args.subject,
        body: args.body,
      };
      const ctx = { requestedBy: identity.email, sendAs: sender.sendAs, requestId, signal };
      // Send-as stays app-only; the caller's own mail goes as the caller when a connection is configured.
      const delegated = !sender.sendAs && deps.delegated !== undefined;
      const receipt = delegated
        ? await deps.delegated!.sendMail(mail, identity.upstreamToken, ctx)
        : await deps.delivery.sendMail(mail, ctx);
      return {
        status: receipt.status,
        delivery: receipt.delivery,
        from: sender.email,
        send_as: sender.sendAs,
        ...(delegated ? { delegated: true } : {}),
        ...(receipt.outboxId ? { outbox_id: receipt.outboxId } : {}),
      };
    },
  });
}
