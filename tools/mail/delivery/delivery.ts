/** What the mail tools hand to a delivery path; both paths (Graph, outbox) take exactly this. */
export interface OutgoingMail {
  from: string;
  to: readonly string[];
  subject: string;
  body: string;
}

export interface OutgoingEvent {
  organizer: string;
  title: string;
  /** ISO 8601 instants, already validated and ordered. */
  start: string;
  end: string;
  attendees: readonly string[];
}

export interface DeliveryContext {
  requestedBy: string;
  sendAs: boolean;
  requestId: string;
  signal?: AbortSignal;
}

export interface MailReceipt {
  delivery: 'graph' | 'outbox';
  status: 'sent' | 'queued';
  outboxId?: string;
}

export interface EventReceipt {
  delivery: 'graph' | 'outbox';
  status: 'created' | 'queued';
  eventId?: string;
  outboxId?: string;
}

export interface MailDelivery {
  readonly kind: 'graph' | 'outbox';
  sendMail(mail: OutgoingMail, ctx: DeliveryContext): Promise<MailReceipt>;
  createEvent(event: OutgoingEvent, ctx: DeliveryContext): Promise<EventReceipt>;
}
