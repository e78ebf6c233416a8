#!/usr/bin/env bash
# Runs the HTTP load benchmark against our listener and against the official @a2a-js/sdk
# REST server (in-memory store, no fsync), same load generator, same machine.
# Usage: bash benches/compare-sdk.sh [seconds per case, default 5]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/tools/setup.sh"
cd "$repo"
seconds="${1:-5}"
echo "== ours (SQLite, every acceptance and state change fsynced) =="
cargo bench --quiet --bench http -- --seconds "$seconds" 2>/dev/null
log="$(mktemp)"
node benches/sdk-server.ts >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q LISTENING "$log" && break; sleep 0.1; done
url="$(sed -n 's/^LISTENING //p' "$log")"
[ -n "$url" ] || { cat "$log" >&2; exit 1; }
echo "== official @a2a-js/sdk 1.3.0 REST server (in-memory, express 5) =="
cargo bench --quiet --bench http -- --seconds "$seconds" --url "$url" 2>/dev/null
