import { z } from 'zod';
import { type AnyTool, defineTool } from '../../kit/tool.ts';
import { ToolError } from '../../kit/tool-errors.ts';
import { resolveSender } from '../send-as.ts';
import type { MailToolDeps } from './send-mail.ts';

const email = z.email().max(320);
// An offset is required: a bare local time would be guessed into some zone, and meetings move by hours.
const instant = z.iso
  .datetime({ offset: true })
  .describe('ISO 8601 date-time with offset, e.g. 2026-03-02T09:00:00+01:00');

export function createCalendarEventTool(deps: MailToolDeps): AnyTool {
  return defineTool({
    name: 'create_calendar_event',
    title: 'Create calendar event',
    description:
      "Creates an event in the caller's calendar and invites the attendees. Platform admins may set as_user_email to create it in another user's calendar.",
    input: z.object({
      title: z.string().min(1).max(255),
      start: instant,
      end: instant,
      attendees: z.array(email).max(500),
      as_user_email: email.optional().describe('admins only: create the event in this calendar'),
    }),
    output: z.object({
      status: z.enum(['created', 'queued']),
      delivery: z.enum(['graph', 'outbox']),
      organizer: z.string(),
      send_as: z.boolean(),
      /** Created as the caller with their connection's delegated token (Graph `/me`), not app-only. */
      delegated: z.boolean().optional(),
      event_id: z.string().optional(),
      outbox_id: z.string().optional(),
    }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    async run(args, { identity, requestId, log, signal }) {
      if (Date.parse(args.end) <= Date.parse(args.start)) {
        throw new ToolError('invalid_arguments', 'end must be after start', 400);
      }
      const sender = resolveSender(identity, args.as_user_email, deps.adminEmails);
      if (sender.sendAs) log.info({ sendAs: sender.email }, 'admin send-as: calendar event');
      const event = {
        organizer: sender.email,
        title: args.title,
        start: args.start,
        end: args.end,
        attendees: args.attendees,
      };
      const ctx = { requestedBy: identity.email, sendAs: sender.sendAs, requestId, signal };
      // Send-as stays app-only; the caller's own calendar is written as the caller when a connection is configured.
      const delegated = !sender.sendAs && deps.delegated !== undefined;
      const receipt = delegated
        ? await deps.delegated!.createEvent(event, identity.upstreamToken, ctx)
        : await deps.delivery.createEvent(event, ctx);
      return {
        status: receipt.status,
        delivery: receipt.delivery,
        organizer: sender.email,
        send_as: sender.sendAs,
        ...(delegated ? { delegated: true } : {}),
        ...(receipt.eventId ? { event_id: receipt.eventId } : {}),
        ...(receipt.outboxId ? { outbox_id: receipt.outboxId } : {}),
      };
    },
  });
}
