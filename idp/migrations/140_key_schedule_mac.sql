-- A signing key's schedule under the encryption key (docs/idp.md § Signing-key rotation): an HMAC-SHA256, under a
-- key derived from PLATFORM_KEY_ENCRYPTION_KEY, over the kid, publish_at, activate_at and withdrawn_at. A row whose
-- schedule was altered (an emergency-withdrawn key published again, an old key made to sign) no longer matches it
-- and is neither published nor used. NULL: a row the previous release wrote; this release seals it at its next
-- pass under the rotation lock. Expand-only: the previous release neither reads nor writes the column.
ALTER TABLE platform.rotating_keys ADD COLUMN schedule_mac bytea;
