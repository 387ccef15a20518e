import type { Pool } from '../../../lib/db.ts';
import type { DeliveryContext, MailDelivery } from './delivery.ts';

/** Delivery when Microsoft Graph is not configured: one row per message or event in platform.mail_outbox. */
export function createOutboxDelivery(pool: Pool): MailDelivery {
  async function insert(
    kind: 'mail' | 'calendar_event',
    sender: string,
    payload: unknown,
    ctx: DeliveryContext,
  ) {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO platform.mail_outbox (kind, sender_email, requested_by, send_as, payload, request_id)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [kind, sender, ctx.requestedBy, ctx.sendAs, JSON.stringify(payload), ctx.requestId],
    );
    return rows[0]!.id;
  }
  return {
    kind: 'outbox',
    async sendMail(mail, ctx) {
      const outboxId = await insert(
        'mail',
        mail.from,
        { to: mail.to, subject: mail.subject, body: mail.body },
        ctx,
      );
      return { delivery: 'outbox', status: 'queued', outboxId };
    },
    async createEvent(event, ctx) {
      const { organizer, ...rest } = event;
      const outboxId = await insert('calendar_event', organizer, rest, ctx);
      return { delivery: 'outbox', status: 'queued', outboxId };
    },
  };
}
