#!/usr/bin/env bash
# One core each, side by side, in one run: our task plane as a Node process on the public
# addon API (benches/ours-server.ts: durable store, every acceptance fsynced, an agent that
# settles each Task at once) against the official @a2a-js/sdk REST server with its
# in-memory store (benches/sdk-server.ts, an executor that settles at once). Each server
# and its agent run pinned to CPU 1 (`taskset -c 1`); the same closed-loop load generator
# (benches/http.rs) runs pinned to CPU 0, 64 keep-alive connections, 10,000 Tasks stored,
# unique messageIds. Every case runs over HTTP+JSON and again over JSON-RPC 2.0 (the same
# work as the calls SendMessage, SendStreamingMessage, GetTask and ListTasks; the SDK's
# JSON-RPC server is its own jsonRpcHandler on the same request handler and store), and
# again over gRPC (the same RPCs through tonic's client, the 64 callers sharing 4 HTTP/2
# connections; the SDK's gRPC server is its grpcService on @grpc/grpc-js, same handler and
# store; ours is the listener's own gRPC port). Prints a table with each case's rate, p99
# and the server's peak RSS, and our ratio to the SDK, then our JSON-RPC and our gRPC
# against our HTTP+JSON.
#
# Usage: bash benches/compare-sdk.sh [seconds per case, default 10] [Tasks stored first,
#        default 10000] [rounds, default 3] [stream/send pairs, default 10]
# Each round runs both servers, one right after the other, in alternating order (ours then
# the SDK, then the SDK then ours, ...), so a drift of the shared host's speed over minutes
# weighs on both sides alike. Each server runs twice per round, a fresh process and store
# each time: once for the send case (then GET, list and returnImmediately, in that order),
# once for the stream case, so both run first on the scenario's stored Tasks; and twice
# more for the same over JSON-RPC, and twice more over gRPC. The table shows, per case,
# the median over the rounds of each side's rate and p99, the highest peak RSS, and the
# median of the rounds' ratios with every round's ratio in brackets. Then our stream
# against our blocking send, paired: one more server of ours runs pairs of 3-s windows of
# each, one after the other, the first of a pair alternating, and the median of the pairs'
# ratios is printed with each pair's (not above 100,000 stored Tasks, where only ours runs).
# Last, our JSON-RPC against our HTTP+JSON, paired the same way on one more server of ours:
# per case (send, stream, GET, list), pairs of 3-s windows of each binding; and our gRPC
# against our HTTP+JSON the same way.
# Above 100,000 stored Tasks only our server runs (the SDK's in-memory list walks every
# Task, so its pages would not finish inside a window, and filling it takes minutes): the
# table then shows our rate, p99 and peak RSS at that size, with no ratio.
# With COMPARE_PEER=<another checkout of this repository, set up and built> the peer is not
# the SDK but that checkout's own benches/ours-server.ts (its addon), on the same terms: a
# paired before/after run of two builds (e.g. `git worktree add /tmp/before <rev>`, then
# `. tools/setup.sh` there). The load generator is this checkout's.
# A benchmark, not a test: the machine's other load moves the numbers; the ratio of two
# servers measured side by side moves less.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The arguments are checked before setup.sh builds anything.
seconds="${1:-10}"
stored="${2:-10000}"
rounds="${3:-3}"
pairs="${4:-10}"
pair_seconds=3
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "compare-sdk: seconds per case must be a positive whole number, not '$seconds'" >&2; exit 2; }
[[ "$stored" =~ ^[0-9]+$ ]] || { echo "compare-sdk: Tasks stored must be a whole number, not '$stored'" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare-sdk: rounds must be a positive whole number, not '$rounds'" >&2; exit 2; }
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "compare-sdk: pairs must be a positive whole number, not '$pairs'" >&2; exit 2; }
peer="${COMPARE_PEER:-}"
if [ -n "$peer" ]; then
  [ -f "$peer/benches/ours-server.ts" ] && ls "$peer"/*.node >/dev/null 2>&1 || {
    echo "compare-sdk: COMPARE_PEER=$peer is not a built checkout of this repository (no benches/ours-server.ts or no *.node addon there; run '. tools/setup.sh' in it)" >&2
    exit 2
  }
  peer_label="peer $(git -C "$peer" rev-parse --short HEAD 2>/dev/null || echo "$peer")"
  peer_short=peer
else
  peer_label="@a2a-js/sdk in memory"
  peer_short=SDK
fi
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
servers=0
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# serve <name> <round> <cases>: starts that server pinned, fills it, runs <cases> (the
# bench's --only list) on it, appends its RESULT lines to $work/<name>.<round>.out, stops it.
serve() {
  serve_with "$1" "round $2 of $rounds: $1, $3" "$work/$1.$2.out" --only "$3"
}

# serve_with <name> <title> <out> <bench arguments>: as serve, with those arguments
# before the usual ones (the bench takes the first of a repeated one).
serve_with() {
  servers=$((servers + 1))
  local title="$2" out="$3" script="benches/$1-server.ts" log="$work/$1.$servers.log"
  # The peer side: the SDK's server, or another checkout's server of ours (COMPARE_PEER).
  if [ "$1" = sdk ] && [ -n "$peer" ]; then script="$peer/benches/ours-server.ts"; fi
  shift 3
  "${server_cpu[@]}" node "$script" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do grep -q '^LISTENING' "$log" && break; sleep 0.1; done
  local url token
  url="$(sed -n 's/^LISTENING \([^ ]*\).*/\1/p' "$log")"
  token="$(sed -n 's/^LISTENING [^ ]* *\(.*\)$/\1/p' "$log")"
  [ -n "$url" ] || { echo "compare-sdk: $script did not start:" >&2; cat "$log" >&2; exit 1; }
  echo "== $title ($url) =="
  "${load_cpu[@]}" "$bench" "$@" --url "$url" --token "$token" --pid "$pid" --seconds "$seconds" --stored "$stored" \
    | tee -a "$out" | grep -v '^RESULT'
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

# run <name> <round>: the cases of one round on that server. The send and stream cases
# each run first on a server of their own, on exactly the stored Tasks of the scenario (a
# case run second met a store the first had grown by 120-140k Tasks, and the case run first
# in a round was ahead of the other by 5-15%, whichever it was); the GET, list and
# returnImmediately cases follow the send case (GET reads the Tasks it made). The
# JSON-RPC cases likewise, on two servers more, and the gRPC cases on two more.
run() {
  serve "$1" "$2" send,get,list,intake
  serve "$1" "$2" stream
  serve "$1" "$2" rpc-send,rpc-get,rpc-list
  serve "$1" "$2" rpc-stream
  serve "$1" "$2" grpc-send,grpc-get,grpc-list
  serve "$1" "$2" grpc-stream
}

with_sdk=$(( stored <= 100000 ))
for round in $(seq "$rounds"); do
  if [ "$with_sdk" = 0 ]; then
    # One fill per round at this size (it takes minutes): the stream case after the send.
    serve ours "$round" send,stream,get,list,rpc-send,rpc-stream,rpc-get,rpc-list,grpc-send,grpc-stream,grpc-get,grpc-list,intake
  elif (( round % 2 )); then
    run ours "$round"; run sdk "$round"
  else
    run sdk "$round"; run ours "$round"
  fi
done

# Our stream against our blocking send, paired: separate runs of the two on this shared
# host differ by several percent from one to the next, more than the two differ; pairs of
# short windows, one after the other on one server, see the same host and store.
if [ "$with_sdk" = 1 ]; then
  serve_with ours "ours, $pairs pairs of ${pair_seconds}-s send and stream windows" "$work/pairs.txt" \
    --pairs "$pairs" --seconds "$pair_seconds"
  serve_with ours "ours, $pairs pairs of ${pair_seconds}-s HTTP+JSON and JSON-RPC windows per case" "$work/bindings.txt" \
    --binding-pairs "$pairs" --seconds "$pair_seconds"
  serve_with ours "ours, $pairs pairs of ${pair_seconds}-s HTTP+JSON and gRPC windows per case" "$work/grpc-bindings.txt" \
    --grpc-pairs "$pairs" --seconds "$pair_seconds"
fi

# The table: one row per case; median rate (req/s), median p99 (ms), highest peak RSS (MB)
# over the rounds; the median of the rounds' ratios, and each round's in brackets.
echo
echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $pinning; ${seconds} s per case, $rounds round(s)."
echo
if [ "$with_sdk" = 1 ]; then
  echo "| case (c=64, $stored Tasks stored) | $peer_label | ours (durable) | ours / $peer_short |"
  echo "| --- | ---: | ---: | ---: |"
else
  echo "| case (c=64, $stored Tasks stored) | ours (durable) |"
  echo "| --- | ---: |"
fi
awk -v rounds="$rounds" -v with_sdk="$with_sdk" '
  function median(list,    v, n, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  # rate, p99 and peak RSS of one side for one case, over the rounds: "N req/s, p99 N ms, N MB".
  function side(who, key,    r, rates, p99s, top) {
    rates = ""; p99s = ""; top = "-"
    for (r = 1; r <= rounds; r++) {
      rates = rates " " rate[who, key, r]; p99s = p99s " " p99[who, key, r]
      if (rss[who, key, r] ~ /^[0-9.]+$/ && (top == "-" || rss[who, key, r] + 0 > top + 0)) top = rss[who, key, r]
    }
    return sprintf("%.0f req/s, p99 %.1f ms, %s MB", median(rates), median(p99s), top)
  }
  # The rate of (who, key) over that of (by, by_key), round by round, as `format` puts the
  # median and every round ratio in order ("r1×, r2×, …").
  function ratio(format, who, key, by, by_key,    r, x, ratios, each) {
    ratios = ""; each = ""
    for (r = 1; r <= rounds; r++) {
      x = rate[who, key, r] / rate[by, by_key, r]
      ratios = ratios " " x; each = each (r > 1 ? ", " : "") sprintf("%.2f×", x)
    }
    return sprintf(format, median(ratios), each)
  }
  FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, part, "."); who = part[1]; round = part[2] }
  $1 == "RESULT" { rate[who, $2, round] = $3; p99[who, $2, round] = $5; rss[who, $2, round] = $6; seen[who, $2]++ }
  END {
    nkeys = split("send stream get list intake rpc-send rpc-stream rpc-get rpc-list grpc-send grpc-stream grpc-get grpc-list", keys, " ")
    label["send"] = "`POST /message:send`, blocking until COMPLETED"
    label["stream"] = "`POST /message:stream` to the terminal frame"
    label["get"] = "`GET /tasks/{id}`"
    label["list"] = "`GET /tasks?pageSize=50`"
    label["intake"] = "`POST /message:send`, `returnImmediately`"
    label["rpc-send"] = "JSON-RPC `SendMessage`, blocking until COMPLETED"
    label["rpc-stream"] = "JSON-RPC `SendStreamingMessage` to the terminal event"
    label["rpc-get"] = "JSON-RPC `GetTask`"
    label["rpc-list"] = "JSON-RPC `ListTasks`, pageSize 50"
    label["grpc-send"] = "gRPC `SendMessage`, blocking until COMPLETED"
    label["grpc-stream"] = "gRPC `SendStreamingMessage` to the terminal event"
    label["grpc-get"] = "gRPC `GetTask`"
    label["grpc-list"] = "gRPC `ListTasks`, pageSize 50"
    for (k = 1; k <= nkeys; k++) {
      key = keys[k]
      if (seen["ours", key] < rounds) continue
      if (with_sdk == 0) { printf "| %s | %s |\n", label[key], side("ours", key); continue }
      if (seen["sdk", key] < rounds) continue
      printf "| %s | %s | %s | %s |\n", label[key], side("sdk", key), side("ours", key), ratio("**%.2f×** (%s)", "ours", key, "sdk", key)
    }
    if (seen["ours", "send"] >= rounds && seen["ours", "stream"] >= rounds)
      print "\nOur stream against our blocking send: " ratio("%.2f× (%s).", "ours", "stream", "ours", "send")
    # The rounds of each binding ran on servers of their own, a minute or so apart: the
    # pairs below are the steadier figure.
    split("ours sdk", sides, " ")
    split("rpc grpc", bindings, " ")
    names["rpc"] = "JSON-RPC"; names["grpc"] = "gRPC"
    for (b = 1; b <= 2; b++) for (w = 1; w <= 2; w++) {
      line = ""; p = bindings[b]
      for (k = 1; k <= 4; k++) {
        key = keys[k]
        if (seen[sides[w], key] < rounds || seen[sides[w], p "-" key] < rounds) continue
        line = line (line == "" ? "" : "; ") key " " ratio("%.2f× (%s)", sides[w], p "-" key, sides[w], key)
      }
      if (line != "") printf "%s / HTTP+JSON, %s, by rounds: %s.\n", names[p], w == 1 ? "ours" : peer_short, line
    }
  }' peer_short="$peer_short" "$work"/*.out
if [ -f "$work/pairs.txt" ]; then
  awk '$1 == "pair" { n++; each = each (n > 1 ? ", " : "") $NF; if ($NF + 0 >= 1) ahead++ }
    $1 == "RESULT" { median = $3 }
    END { printf "Paired on one server (%d pairs of %s-s windows): median %s (%s); stream ≥ send in %d of %d pairs.\n", n, secs, median, each, ahead, n }' \
    secs="$pair_seconds" "$work/pairs.txt"
fi
# Per case: the pairs' rate ratios (<binding> / HTTP+JSON), then the ratios of the
# server's CPU per request (HTTP+JSON / <binding>: above 1, <binding> costs less).
for paired in "bindings.txt binding JSON-RPC" "grpc-bindings.txt grpc-binding gRPC"; do
  read -r file key name <<<"$paired"
  [ -f "$work/$file" ] || continue
  awk '$1 == "pair" { k = $3 SUBSEP ($4 == "server" ? "cpu" : "rate"); each[k] = each[k] (n[k]++ ? ", " : "") $NF; if ($NF + 0 >= 0.9) met[k]++ }
    $1 == "RESULT" && ($2 == key || $2 == key "-cpu") {
      k = $3 SUBSEP ($2 == key ? "rate" : "cpu")
      what = $2 == key ? "rate, " name " / HTTP+JSON" : "server CPU per request, HTTP+JSON / " name
      printf "Ours, %s, paired on one server (%d pairs of %s-s windows), %s: median %s (%s); ≥ 0.90 in %d of %d pairs.\n", what, n[k], secs, $3, $4, each[k], met[k], n[k]
    }' secs="$pair_seconds" key="$key" name="$name" "$work/$file"
done
