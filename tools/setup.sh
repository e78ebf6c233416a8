#!/usr/bin/env bash
# Installs and builds everything the product and its tests need, on a fresh machine:
# the pinned Node 22 (from the npm registry), the npm dev dependencies (Pi, the napi-rs CLI,
# TypeScript) and the Rust addon. Idempotent: a second run only rebuilds what changed.
#
# Source it to get Node 22 first on PATH:   . tools/setup.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PATH="$(bash "$repo/tools/ensure-node.sh"):$PATH"
export PATH
command -v cargo >/dev/null || { echo "setup: cargo is needed (install Rust from https://rustup.rs)" >&2; exit 1; }

# npm ci only when the lock file changed since the last install.
stamp="$repo/node_modules/.task-plane-lock"
if ! cmp -s "$repo/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$repo" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$repo/package-lock.json" "$stamp"
fi

# The addon: a2a-task-plane.<platform>.node, plus the generated index.js / index.d.ts.
mkdir -p "$repo/target"
(cd "$repo" && npm run --silent build >/dev/null 2>"$repo/target/napi-build.log") || {
  cat "$repo/target/napi-build.log" >&2
  echo "setup: building the Rust addon failed (log above)" >&2
  exit 1
}
