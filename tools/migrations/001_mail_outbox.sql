-- The mail server's outbox: where `send_mail` and `create_calendar_event` deliver when Microsoft Graph is not
-- configured (development, tests, or a deployment that drains it with another sender). Each row is one
-- message or one event, exactly as requested, with who asked and as whom it goes out.
CREATE TABLE platform.mail_outbox (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  kind text NOT NULL CHECK (kind IN ('mail', 'calendar_event')),
  sender_email text NOT NULL,                -- the mailbox it goes out from: the caller, or an admin's as_user_email
  requested_by text NOT NULL,                -- the caller's email (differs from sender_email only for send-as)
  send_as boolean NOT NULL,
  payload jsonb NOT NULL,
  request_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mail_outbox_created_at ON platform.mail_outbox (created_at);
