#!/usr/bin/env bash
# One core each, side by side, in one run: our task plane as a Node process on the public
# addon API (benches/ours-server.ts: durable store, every acceptance fsynced, an agent that
# settles each Task at once) against the official @a2a-js/sdk REST server with its
# in-memory store (benches/sdk-server.ts, an executor that settles at once). Each server
# and its agent run pinned to CPU 1 (`taskset -c 1`); the same closed-loop load generator
# (benches/http.rs) runs pinned to CPU 0, 64 keep-alive connections, 10,000 Tasks stored,
# unique messageIds. Prints a table with each case's rate, p99 and the server's peak RSS,
# and our ratio to the SDK.
#
# Usage: bash benches/compare-sdk.sh [seconds per case, default 10] [Tasks stored first,
#        default 10000]
# Above 100,000 stored Tasks only our server runs (the SDK's in-memory list walks every
# Task, so its pages would not finish inside a window, and filling it takes minutes): the
# table then shows our rate, p99 and peak RSS at that size, with no ratio.
# A benchmark, not a test: the machine's other load moves the numbers; the ratio of two
# servers measured in the same run moves less.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The arguments are checked before setup.sh builds anything.
seconds="${1:-10}"
stored="${2:-10000}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "compare-sdk: seconds per case must be a positive whole number, not '$seconds'" >&2; exit 2; }
[[ "$stored" =~ ^[0-9]+$ ]] || { echo "compare-sdk: Tasks stored must be a whole number, not '$stored'" >&2; exit 2; }
. "$repo/tools/setup.sh"
cd "$repo"

if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_cpu=(taskset -c 1)
  load_cpu=(taskset -c 0)
  pinning="server and its agent on CPU 1, load on CPU 0"
else
  server_cpu=()
  load_cpu=()
  pinning="NOT pinned (needs 2 CPUs and taskset): the figures are not one-core figures"
fi

bench="$(cargo bench --bench http --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)"
[ -x "$bench" ] || { echo "compare-sdk: could not build benches/http.rs" >&2; exit 1; }

work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# run <name> <server script>: starts the server pinned, loads it, keeps its RESULT lines.
run() {
  local name="$1" script="$2" log="$work/$1.log"
  "${server_cpu[@]}" node "$script" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do grep -q '^LISTENING' "$log" && break; sleep 0.1; done
  local url token
  url="$(sed -n 's/^LISTENING \([^ ]*\).*/\1/p' "$log")"
  token="$(sed -n 's/^LISTENING [^ ]* *\(.*\)$/\1/p' "$log")"
  [ -n "$url" ] || { echo "compare-sdk: $script did not start:" >&2; cat "$log" >&2; exit 1; }
  echo "== $name ($url) =="
  "${load_cpu[@]}" "$bench" --url "$url" --token "$token" --pid "$pid" --seconds "$seconds" --stored "$stored" \
    | tee "$work/$name.out" | grep -v '^RESULT'
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

run ours benches/ours-server.ts
with_sdk=$(( stored <= 100000 ))
if [ "$with_sdk" = 1 ]; then run sdk benches/sdk-server.ts; fi

# The table: one row per case; rate (req/s), p99 (ms), peak RSS (MB); our ratio.
echo
echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $pinning; ${seconds} s per case."
echo
if [ "$with_sdk" = 1 ]; then
  echo "| case (c=64, $stored Tasks stored) | @a2a-js/sdk in memory | ours (durable) | ours / SDK |"
  echo "| --- | ---: | ---: | ---: |"
else
  echo "| case (c=64, $stored Tasks stored) | ours (durable) |"
  echo "| --- | ---: |"
fi
for key in send stream get list intake; do
  ours="$(awk -v k="$key" '$1 == "RESULT" && $2 == k' "$work/ours.out")"
  [ -n "$ours" ] || continue
  label="$(case "$key" in
    send) echo 'POST /message:send, blocking until COMPLETED' ;;
    intake) echo 'POST /message:send, returnImmediately' ;;
    stream) echo 'POST /message:stream to the terminal frame' ;;
    get) echo 'GET /tasks/{id}' ;;
    list) echo 'GET /tasks?pageSize=50' ;;
  esac)"
  if [ "$with_sdk" = 1 ]; then
    sdk="$(awk -v k="$key" '$1 == "RESULT" && $2 == k' "$work/sdk.out")"
    [ -n "$sdk" ] || continue
    echo "$sdk" "$ours" | awk -v label="$label" '{
      printf "| %s | %s req/s, p99 %s ms, %s MB | %s req/s, p99 %s ms, %s MB | **%.2f×** |\n",
        label, $3, $5, $6, $9, $11, $12, $9 / $3 }'
  else
    echo "$ours" | awk -v label="$label" '{
      printf "| %s | %s req/s, p99 %s ms, %s MB |\n", label, $3, $5, $6 }'
  fi
done
