-- Machine clients (docs/idp.md § Machine clients): registered by an administrator, authenticated by
-- private_key_jwt (their key set is in platform.oauth_clients, type `machine`), they get tokens with the
-- client_credentials grant, acting as `email` for `services`. A revoked one keeps its row (the audit names it).
CREATE TABLE platform.machine_clients (
  client_id text PRIMARY KEY REFERENCES platform.oauth_clients (client_id),
  email text NOT NULL,
  services text[] NOT NULL,
  workload_issuer text,
  workload_subject text,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  revoked_by text,
  CHECK ((workload_issuer IS NULL) = (workload_subject IS NULL))
);
-- One live client per workload identity (a workload assertion names exactly one client).
CREATE UNIQUE INDEX machine_clients_workload ON platform.machine_clients (workload_issuer, workload_subject)
  WHERE revoked_at IS NULL AND workload_issuer IS NOT NULL;
