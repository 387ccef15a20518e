-- Assertion grants (docs/idp.md § Enterprise-managed authorization, § Workload assertions): the issuer of the
-- assertion a token was issued for (an ID-JAG's enterprise IdP, a workload token's CI or cluster issuer), so the
-- audit names who vouched for the user or the workload. NULL for every other grant.
ALTER TABLE platform.issuance_audit ADD COLUMN assertion_issuer text;
