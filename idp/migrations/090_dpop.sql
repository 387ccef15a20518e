-- DPoP (RFC 9449, docs/idp.md § DPoP): the key a sign-in is bound to (RFC 7638 thumbprint, base64url), set when
-- the family is created with a proof; every refresh of a bound family needs a proof by that key. NULL: unbound.
ALTER TABLE platform.refresh_families ADD COLUMN dpop_jkt text;
-- `dpop_jkt` on authorize: the code's exchange needs a proof by that key.
ALTER TABLE platform.oauth_codes ADD COLUMN dpop_jkt text;
