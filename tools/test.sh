#!/usr/bin/env bash
# Runs every test, installing and building what it needs first (see tools/setup.sh):
# the Rust unit and integration tests (those of the PostgreSQL store against a real server
# they start themselves), then the Node tests (addon API, real clients, real Pi
# headless with its scripted faux provider) under the pinned Node 22.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/tools/setup.sh"
cd "$repo"
# The PostgreSQL store's tests start their own throwaway server from Debian's `postgresql`
# package; a clean machine gets it here (as root), or is told what to install.
bash "$repo/tools/ensure-postgres.sh" >/dev/null
# --release, with the target triple setup.sh exported (CARGO_BUILD_TARGET), shares one
# dependency build with the addon that setup.sh just built.
cargo test --release
# Second pass: the contract, durability and isolation suites again with the plane on
# PostgreSQL (the same test binaries; each store root gets a database of its own; the few
# tests of SQLite's own files, fsyncs and migrations say so and return).
A2A_TEST_STORE=postgres cargo test --release --test contract_intake --test contract_continuation \
  --test contract_reads --test agent_tools --test wake_status_messages --test wake_queue \
  --test store_durability --test delivery --test retention --test retention_periodic \
  --test operator_lookups --test operations --test http_listener --test jsonrpc --test grpc \
  --test hostile_clients
node --test --test-concurrency=1 '__test__/**/*.test.ts'
