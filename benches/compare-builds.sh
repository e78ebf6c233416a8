#!/usr/bin/env bash
# Two builds of our server, paired on one core: this checkout (B) against another checkout
# of this repository (A, e.g. `git worktree add /tmp/before <rev>`, then `. tools/setup.sh`
# there). Both servers (benches/ours-server.ts on each checkout's addon) run at once, pinned
# to CPU 1; the load generator (benches/http.rs, pinned to CPU 0) fills each with the same
# stored Tasks, then for each case runs pairs of short windows, one on each server right
# after the other, the first of a pair alternating, and prints the median B/A rate ratio of
# the pairs with the lowest and highest. Separate runs on this shared machine differ by
# more than two builds do; the two windows of a pair see the same host.
#
# Usage: bash benches/compare-builds.sh <other checkout> [seconds per window, default 3]
#        [pairs per case, default 8] [Tasks stored first, default 10000] [cases, default
#        send,stream,get,list,intake]
# A benchmark, not a test.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="${1:-}"
seconds="${2:-3}"
pairs="${3:-8}"
stored="${4:-10000}"
cases="${5:-send,stream,get,list,intake}"
[ -n "$peer" ] && [ -f "$peer/benches/ours-server.ts" ] && ls "$peer"/*.node >/dev/null 2>&1 || {
  echo "compare-builds: the first argument must be a built checkout of this repository (benches/ours-server.ts and a *.node addon there; run '. tools/setup.sh' in it), not '$peer'" >&2
  exit 2
}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "compare-builds: seconds per window must be a positive whole number, not '$seconds'" >&2; exit 2; }
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "compare-builds: pairs must be a positive whole number, not '$pairs'" >&2; exit 2; }
[[ "$stored" =~ ^[0-9]+$ ]] || { echo "compare-builds: Tasks stored must be a whole number, not '$stored'" >&2; exit 2; }
. "$repo/tools/setup.sh"
cd "$repo"

if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_cpu=(taskset -c 1)
  load_cpu=(taskset -c 0)
  pinning="both servers and their agents on CPU 1, load on CPU 0"
else
  server_cpu=()
  load_cpu=()
  pinning="NOT pinned (needs 2 CPUs and taskset)"
fi

bench="$(cargo bench --bench http --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)"
[ -x "$bench" ] || { echo "compare-builds: could not build benches/http.rs" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start <checkout> <log>: that checkout's server, pinned, until it prints its URL and token.
start() {
  "${server_cpu[@]}" node "$1/benches/ours-server.ts" >"$2" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do grep -q '^LISTENING' "$2" && break; sleep 0.1; done
  grep -q '^LISTENING' "$2" || { echo "compare-builds: $1/benches/ours-server.ts did not start:" >&2; cat "$2" >&2; exit 1; }
}
start "$peer" "$work/a.log"
start "$repo" "$work/b.log"
read -r url_a token_a < <(sed -n 's/^LISTENING \([^ ]*\) *\(.*\)$/\1 \2/p' "$work/a.log")
read -r url_b token_b < <(sed -n 's/^LISTENING \([^ ]*\) *\(.*\)$/\1 \2/p' "$work/b.log")
label_a="$(git -C "$peer" rev-parse --short HEAD 2>/dev/null || echo "$peer")"
label_b="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo this)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo '+changes')"
echo "== A: $label_a ($url_a), B: $label_b ($url_b) =="
"${load_cpu[@]}" "$bench" --url "$url_a" --token "$token_a" --versus "$url_b" --versus-token "$token_b" \
  --pairs "$pairs" --seconds "$seconds" --stored "$stored" --only "$cases" | tee "$work/out.txt" | grep -v '^RESULT'

echo
echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $pinning; $pairs pairs of ${seconds}-s windows per case, $stored Tasks stored first."
echo
echo "| case (c=64) | B ($label_b) / A ($label_a): median of the pairs | lowest | highest |"
echo "| --- | ---: | ---: | ---: |"
awk '$1 == "RESULT" && $2 == "versus" { printf "| %s | **%.3f** | %.3f | %.3f |\n", $3, $4, $5, $6 }' "$work/out.txt"
