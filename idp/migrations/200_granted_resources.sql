-- RFC 8707 resources bound to their grant (docs/idp.md § Resource indicators): what an authorization request's
-- `resource` named (`platform`: the platform audience or PUBLIC_BASE_URL's origin; `service:<name>`: a service's
-- MCP endpoint), keyed by the refresh-token family its code starts, so the code's exchange and every refresh of
-- that family are refused a `resource` naming anything else. No row: the request named none (any of the
-- platform's resources may be asked for at the token endpoint). Expand-only: a new table that earlier releases
-- neither read nor write.
CREATE TABLE platform.granted_resources (
  family_id uuid PRIMARY KEY,
  target text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
