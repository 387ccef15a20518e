-- Concurrent refresh (docs/idp.md § Token endpoint): within PLATFORM_REFRESH_RETRY_SECONDS of its first rotation
-- a rotated-out token may be rotated again, into a sibling successor (its own chain in the same family). The row
-- counts its successors (bounded) and each successor names the token it came from.
ALTER TABLE platform.refresh_tokens ADD COLUMN rotations smallint NOT NULL DEFAULT 0;
ALTER TABLE platform.refresh_tokens ADD COLUMN rotated_from uuid;
-- Rows rotated before this migration: one successor. Only those still inside the longest allowed window matter.
UPDATE platform.refresh_tokens SET rotations = 1
 WHERE rotated_to IS NOT NULL AND rotated_at > now() - interval '3600 seconds';
