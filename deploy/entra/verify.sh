#!/usr/bin/env bash
# Checks a connector application registration against the spec's App registration table and operational
# acceptance checks #11 (manifest), #12 (service principal) and #13 (vault secret length), one row per check,
# in the same format as `platform doctor`. Exit 0 only when nothing fails. Needs az, Node.js, bash.
#
#   deploy/entra/verify.sh --service platform --base-url https://app.example.com \
#     [--vault my-key-vault [--secret-name platform-mcp-client-secret]] [--callback URL1 --callback URL2]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GRAPH_APP_ID=00000003-0000-0000-c000-000000000000

usage() {
  printf 'usage:\n' >&2
  sed -n '6,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  printf 'verify: %s\n' "$*" >&2
  exit 1
}

service='' base_url='' vault='' secret_name=''
callbacks=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --service) service="${2:-}"; shift 2 ;;
    --base-url) base_url="${2:-}"; shift 2 ;;
    --callback) callbacks+=("${2:-}"); shift 2 ;;
    --vault) vault="${2:-}"; shift 2 ;;
    --secret-name) secret_name="${2:-}"; shift 2 ;;
    -h | --help) usage ;;
    *) printf 'verify: unknown argument %s\n' "$1" >&2; usage ;;
  esac
done
[[ -n "$service" && -n "$base_url" ]] || usage
secret_name="${secret_name:-${service}-mcp-client-secret}"
base_url="${base_url%/}"
uri="${base_url}/${service}/mcp"

command -v az >/dev/null 2>&1 || die 'the Azure CLI (az) is required'
umask 077
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

app_id="$(az ad app list --filter "identifierUris/any(u:u eq '${uri}')" --query '[0].appId' -o tsv)"
[[ -n "$app_id" ]] || die "no application has the identifier URI ${uri}"
az ad app show --id "$app_id" -o json >"$work/app.json"
sp_id="$(az ad sp list --filter "appId eq '${app_id}'" --query '[0].id' -o tsv)"
az ad app permission list-grants --id "$app_id" --show-resource-name -o json >"$work/grants.json"
user_read_id="$(az ad sp show --id "$GRAPH_APP_ID" --query "oauth2PermissionScopes[?value=='User.Read'].id | [0]" -o tsv)"

check=(node "$here/cli.ts" check --service "$service" --base-url "$base_url" --user-read-id "$user_read_id"
  --app "$work/app.json" --grants "$work/grants.json" --sp-exists "$([[ -n "$sp_id" ]] && echo true || echo false)")
for c in "${callbacks[@]}"; do check+=(--callback "$c"); done
if [[ -n "$vault" ]]; then
  # Only the length leaves this shell: the value is never printed or written.
  value="$(az keyvault secret show --vault-name "$vault" --name "$secret_name" --query value -o tsv)"
  check+=(--secret-length "${#value}")
  unset value
fi
printf 'application %s (%s)\n' "$app_id" "$uri"
"${check[@]}"
