#!/usr/bin/env bash
# Registers the connector application of one tool server at Microsoft Entra, row by row of the spec's App
# registration table (application.ts builds the Graph body; each row is named there), then stores its client
# secret in Azure Key Vault and grants tenant admin consent. Needs: az (logged in to the target tenant as an
# administrator who may consent), Node.js 22.18+ (the repository's), bash.
#
#   deploy/entra/register.sh --service platform --base-url https://app.example.com \
#     --callback https://claude.ai/api/mcp/auth_callback --callback https://claude.com/api/mcp/auth_callback \
#     --vault my-key-vault [--secret-name platform-mcp-client-secret] [--display-name "platform MCP connector"]
#
# Run it once per service: every registration comes from the same code, so they cannot differ.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GRAPH_APP_ID=00000003-0000-0000-c000-000000000000
# The new service principal takes a while to replicate before consent can be granted to it.
CONSENT_RETRY_SECONDS="${CONSENT_RETRY_SECONDS:-10}"
CONSENT_ATTEMPTS=6

usage() {
  printf 'usage:\n' >&2
  sed -n '7,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  printf 'register: %s\n' "$*" >&2
  exit 1
}

service='' base_url='' vault='' secret_name='' display_name=''
callbacks=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --service) service="${2:-}"; shift 2 ;;
    --base-url) base_url="${2:-}"; shift 2 ;;
    --callback) callbacks+=("${2:-}"); shift 2 ;;
    --vault) vault="${2:-}"; shift 2 ;;
    --secret-name) secret_name="${2:-}"; shift 2 ;;
    --display-name) display_name="${2:-}"; shift 2 ;;
    -h | --help) usage ;;
    *) printf 'register: unknown argument %s\n' "$1" >&2; usage ;;
  esac
done
[[ -n "$service" && -n "$base_url" && -n "$vault" && ${#callbacks[@]} -eq 2 ]] || usage
secret_name="${secret_name:-${service}-mcp-client-secret}"
base_url="${base_url%/}"
uri="${base_url}/${service}/mcp"

command -v az >/dev/null 2>&1 || die 'the Azure CLI (az) is required'
command -v node >/dev/null 2>&1 || die 'Node.js is required'

# The secret passes through this directory only (mode 0700, files 0600), never through a command line.
umask 077
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

tenant_id="$(az account show --query tenantId -o tsv)"
existing="$(az ad app list --filter "identifierUris/any(u:u eq '${uri}')" --query '[0].appId' -o tsv)"
[[ -z "$existing" ]] || die "an application with identifier URI ${uri} exists already (appId ${existing}); check it with deploy/entra/verify.sh"

user_read_id="$(az ad sp show --id "$GRAPH_APP_ID" --query "oauth2PermissionScopes[?value=='User.Read'].id | [0]" -o tsv)"
[[ -n "$user_read_id" ]] || die 'could not look up the Microsoft Graph User.Read permission id'
scope_id="$(node -e 'process.stdout.write(crypto.randomUUID())')"

render=(node "$here/cli.ts" render --service "$service" --base-url "$base_url" --scope-id "$scope_id" --user-read-id "$user_read_id"
  --callback "${callbacks[0]}" --callback "${callbacks[1]}")
[[ -z "$display_name" ]] || render+=(--display-name "$display_name")
"${render[@]}" >"$work/application.json"

# Rows 1-7: the application (single tenant, identifier URI, token version 2, scope, redirects, User.Read, id token).
read -r object_id app_id < <(az rest --method POST --uri 'https://graph.microsoft.com/v1.0/applications' \
  --headers 'Content-Type=application/json' --body "@$work/application.json" --query '[id, appId]' -o tsv)
[[ -n "${app_id:-}" ]] || die 'Graph did not return the new application id'
printf 'register: created application %s (object %s)\n' "$app_id" "$object_id" >&2

# Row 9 prerequisite: the app's own mcp.access among its required permissions, so one consent covers both.
node "$here/cli.ts" own-scope --app-id "$app_id" --scope-id "$scope_id" --user-read-id "$user_read_id" >"$work/access.json"
az rest --method PATCH --uri "https://graph.microsoft.com/v1.0/applications/${object_id}" \
  --headers 'Content-Type=application/json' --body "@$work/access.json" >/dev/null

# Row 1 (and check #12): the service principal, created explicitly.
az ad sp create --id "$app_id" --query id -o tsv >/dev/null

# Row 8: a 2-year secret. Only stdout is captured; az's warning about protecting the credential goes to a file
# of its own. Capturing 2>&1 is how a ~270-character "secret" ends up in the vault.
if ! secret="$(az ad app credential reset --id "$app_id" --append --display-name 'assistant connector' --years 2 \
  --query password -o tsv 2>"$work/credential.stderr")"; then
  cat "$work/credential.stderr" >&2
  die 'could not create the client secret'
fi
secret_length="${#secret}"
if ((secret_length < 40 || secret_length > 50)); then
  die "the captured client secret is ${secret_length} characters, expected 40 to 50: not stored (az stderr: $(tr '\n' ' ' <"$work/credential.stderr"))"
fi
printf '%s' "$secret" >"$work/secret"
unset secret
az keyvault secret set --vault-name "$vault" --name "$secret_name" --file "$work/secret" --encoding utf-8 \
  --query id -o tsv >/dev/null
rm -f "$work/secret"

# Row 9: tenant-wide admin consent for User.Read and mcp.access.
consented=0
for ((attempt = 1; attempt <= CONSENT_ATTEMPTS; attempt++)); do
  if az ad app permission admin-consent --id "$app_id" 2>"$work/consent.stderr"; then
    consented=1
    break
  fi
  sleep "$CONSENT_RETRY_SECONDS"
done
if ((consented == 0)); then
  cat "$work/consent.stderr" >&2
  die "admin consent failed ${CONSENT_ATTEMPTS} times; grant it later: az ad app permission admin-consent --id ${app_id}"
fi

prefix="${service^^}"
prefix="${prefix//-/_}"
cat <<DONE
Registered the ${service} connector application.
  application (client) id  ${app_id}
  tenant                   ${tenant_id}
  identifier URI           ${uri}
  client secret            in Key Vault ${vault} as ${secret_name} (${secret_length} characters)
Add to deploy/.env:
IDP_TENANT_ID=${tenant_id}
${prefix}_MCP_CLIENT_ID=${app_id}
Check it: deploy/entra/verify.sh --service ${service} --base-url ${base_url} --vault ${vault} --secret-name ${secret_name}
DONE
