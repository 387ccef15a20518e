import type { MailDelivery, OutgoingEvent, OutgoingMail } from './delivery.ts';
import type { GraphClient } from './graph-client.ts';

// Graph's dateTimeTimeZone: a local date-time plus a zone name. Instants are sent as UTC wall-clock times.
function graphDateTime(iso: string): { dateTime: string; timeZone: string } {
  return { dateTime: new Date(iso).toISOString().replace(/Z$/, ''), timeZone: 'UTC' };
}

function recipients(addresses: readonly string[]) {
  return addresses.map((address) => ({ emailAddress: { address } }));
}

/** Graph's sendMail body (the same for `/users/{id}` and `/me`). */
export function graphMailBody(mail: OutgoingMail) {
  return {
    message: {
      subject: mail.subject,
      body: { contentType: 'Text', content: mail.body },
      toRecipients: recipients(mail.to),
    },
    saveToSentItems: true,
  };
}

/** Graph's event body (the same for `/users/{id}/events` and `/me/events`). */
export function graphEventBody(event: OutgoingEvent) {
  return {
    subject: event.title,
    start: graphDateTime(event.start),
    end: graphDateTime(event.end),
    attendees: event.attendees.map((address) => ({ emailAddress: { address }, type: 'required' })),
  };
}

/** Delivery through Microsoft Graph, app-only: the mailbox is addressed by `/users/{id}`, not `/me`. */
export function createGraphDelivery(graph: GraphClient): MailDelivery {
  return {
    kind: 'graph',
    async sendMail(mail, ctx) {
      // POST /users/{id}/sendMail answers 202 with an empty body.
      await graph.post(`/users/${encodeURIComponent(mail.from)}/sendMail`, graphMailBody(mail), ctx.signal);
      return { delivery: 'graph', status: 'sent' };
    },
    async createEvent(event, ctx) {
      const created = (await graph.post(
        `/users/${encodeURIComponent(event.organizer)}/events`,
        graphEventBody(event),
        ctx.signal,
      )) as { id?: unknown } | undefined;
      return {
        delivery: 'graph',
        status: 'created',
        eventId: typeof created?.id === 'string' ? created.id : undefined,
      };
    },
  };
}
