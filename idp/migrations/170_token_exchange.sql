-- The token exchange (RFC 8693; docs/idp.md § Token exchange). Expand-only: new columns with defaults and an
-- index; the previous release neither reads nor writes them.
--
-- A machine client registered with --may-act may exchange a user's access token for one that names it in `act`.
ALTER TABLE platform.machine_clients ADD COLUMN may_act boolean NOT NULL DEFAULT false;

-- An exchange's issuance-audit row names the subject token it was exchanged from and, for the gateway's exchange
-- for a user's connection, the connection (no platform token is issued then: the row's jti is the exchange's own
-- id). Revoking a token, its sign-in or a machine client denies every live token exchanged from it, down the
-- chain, through subject_jti.
ALTER TABLE platform.issuance_audit ADD COLUMN subject_jti uuid;
ALTER TABLE platform.issuance_audit ADD COLUMN connection text;
CREATE INDEX issuance_audit_subject_jti ON platform.issuance_audit (subject_jti) WHERE subject_jti IS NOT NULL;
