#!/usr/bin/env bash
# Runs the product: a resident Pi with this package loaded as an extension. Installs and
# builds what it needs first (tools/setup.sh). Extra arguments go to `pi` unchanged
# (e.g. `bash tools/run.sh --model <provider>/<id>`).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/tools/setup.sh"
exec "$repo/node_modules/.bin/pi" -e "$repo" "$@"
