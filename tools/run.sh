#!/usr/bin/env bash
# Runs the product: a resident Pi with this package loaded as an extension and the A2A
# listener on loopback (A2A_SERVER=1, 127.0.0.1:8788 unless A2A_HOST/A2A_PORT say
# otherwise), on the default task-plane store. Installs and builds what it needs first.
#
#   bash tools/run.sh            # your configured Pi model works the tasks
#   bash tools/run.sh --demo     # the offline, scripted demo agent (no key, no network)
#
# Other arguments go to `pi` unchanged. Without A2A_CREDENTIALS_PATH, a credentials file
# with a fresh random token is created once (mode 0600) and its token printed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/tools/setup.sh"

demo=0
args=()
for arg in "$@"; do
  if [ "$arg" = "--demo" ]; then demo=1; else args+=("$arg"); fi
done

export A2A_SERVER="${A2A_SERVER:-1}"
if [ -z "${A2A_CREDENTIALS_PATH:-}" ]; then
  data="${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels"
  export A2A_CREDENTIALS_PATH="$data/a2a-credentials.json"
  if [ ! -f "$A2A_CREDENTIALS_PATH" ]; then
    mkdir -p "$data"
    chmod 700 "$data"
    token="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
    (umask 077 && printf '{"credentials": [{"token": "%s", "principal": "local"}]}\n' "$token" >"$A2A_CREDENTIALS_PATH")
    echo "Created $A2A_CREDENTIALS_PATH (mode 0600) with a bearer token for principal 'local':"
    echo "  $token"
    echo "(shown once; it stays in that file)"
  fi
fi
echo "A2A listener: http://${A2A_HOST:-127.0.0.1}:${A2A_PORT:-8788}  (Authorization: Bearer <token from $A2A_CREDENTIALS_PATH>)"

pi="$repo/node_modules/.bin/pi"
if [ "$demo" = 1 ]; then
  echo "Using the OFFLINE DEMO AGENT: a scripted stand-in for a model, not an LLM."
  exec "$pi" -e "$repo" -e "$repo/extensions/demo-agent.ts" --provider a2a-demo --model scripted-demo-agent ${args[@]+"${args[@]}"}
fi
exec "$pi" -e "$repo" ${args[@]+"${args[@]}"}
