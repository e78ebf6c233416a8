#!/usr/bin/env bash
# The fleet benchmark (issue #38, item 7): our task plane on PostgreSQL beside the official
# Python SDK's cluster store on the same PostgreSQL, in one run, as a ratio. One throwaway
# PostgreSQL (benches/fleet-pg.sh, the one benches/fleet-peer.sh starts too); per case and
# node count a fresh database of its own:
# - ours: benches/ours-server.ts with A2A_STORE_URL=postgresql://…/<database> (each node
#   process keeps its own local root in a temp dir; the Tasks live in the database), an
#   embedder agent that settles each Task at once;
# - the SDK peer: benches/sdk-cluster-server.py (the SDK's server on its PostgreSQL
#   cluster store), an executor that settles each Task at once.
# Cases (benches/http.rs, 64 keep-alive connections per generator): `send`, POST
# /message:send blocking until COMPLETED; `intake`, the same with returnImmediately.
# Node counts: 1 process, one generator; 2 processes on one database (A started, then B),
# two generators at once, one per process, their rates added (the p99 is the higher one).
# Each case and node count starts from `stored` Tasks put in through the first process
# (a generator run that only fills), then measures `seconds`.
# CPUs: every server process on CPU 1 (`taskset -c 1`; two processes share it: two nodes
# here is one core's work split over two processes on one database, not a second
# machine), every generator on CPU 0, PostgreSQL NOT pinned (its backends run where the
# scheduler puts them, on either CPU, so it competes with both).
# Rounds alternate which side goes first (odd rounds ours, even rounds the SDK). The
# table: per case and node count, the median over the rounds of each side's rate and p99,
# and the median of the rounds' ours / SDK ratios with every round's ratio in brackets.
# Then `FLEET <side> <nodes> <case> <round> <process> <req/s> <p50 ms> <p99 ms> <peak RSS MB>`
# lines, one per generator.
#
# Our agent's rejected writes are counted, not hidden: each `agent: <task>: <error>` line
# ours-server.ts logs, per case, and in total under the table (on PostgreSQL a startWork
# issued back to back with its complete can reach the database after it and be refused
# as a change to a completed Task: the Task ends COMPLETED, without its WORKING step).
# FLEET_OURS_ARGS=--awaiting makes our agent await each write before the next (no such
# refusals; one commit more per Task on the critical path).
#
# Usage: bash benches/fleet-compare.sh [seconds per case, default 5] [Tasks stored first,
#        default 2000] [rounds, default 2]; --help prints this header
# A benchmark, not a test: other load on the machine moves the numbers.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The arguments, the build, the CPU pinning and PostgreSQL: benches/fleet-pg.sh.
. "$repo/benches/fleet-pg.sh"
fleet_args 2 "$@"
case "${FLEET_OURS_ARGS:-}" in
  "" | --awaiting) ;;
  *) say "FLEET_OURS_ARGS must be empty or --awaiting (ours-server.ts's one option), not '$FLEET_OURS_ARGS'"; exit 2 ;;
esac
fleet_build "server processes"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
fleet_pg_start

# server <side> <log name> <database>: starts one server process of that side pinned, on
# that database, waits for its LISTENING line; sets url, token and pid.
server() {
  local log="$work/$2.log"
  # Emptied here: a LISTENING line left from an earlier start must not be read as this one's.
  : >"$log"
  case "$1" in
    # shellcheck disable=SC2086 # FLEET_OURS_ARGS: words for ours-server.ts, split on purpose
    ours) A2A_STORE_URL="$(pg_url "$3")" "${server_cpu[@]}" node benches/ours-server.ts ${FLEET_OURS_ARGS:-} >"$log" 2>&1 & ;;
    sdk) "${server_cpu[@]}" "$python" benches/sdk-cluster-server.py --db "$(pg_url "$3")" >"$log" 2>&1 & ;;
  esac
  pid=$!
  pids+=("$pid")
  fleet_listening "$1 server $2" "$log"
}
load() { "${load_cpu[@]}" "$bench" "$@"; }

# measure <side> <nodes> <case> <round>: a fresh database, <nodes> server processes on it,
# the fill through the first, then one generator per process at once; their RESULT lines
# in $work/<side>.<nodes>.<case>.<round>.<process>.out (process a, b).
measure() {
  local side="$1" nodes="$2" key="$3" round="$4"
  local db="${side}${nodes}_${key}_${round}" name="$side.$nodes.$key.$round" n
  local urls=() tokens=() servers=() gens=()
  echo "== round $round of $rounds: $side, $nodes node(s), $key (database $db) =="
  make_db "$db"
  for n in $(seq "$nodes"); do
    server "$side" "$name.$n" "$db"
    urls+=("$url"); tokens+=("$token"); servers+=("$pid")
  done
  # The fill alone (`--only fill` names no case: the generator stores `stored` Tasks with
  # returnImmediately, waits for them to settle, and measures nothing).
  load --url "${urls[0]}" --token "${tokens[0]}" --stored "$stored" --seconds 1 --only fill >/dev/null
  local proc=(a b)
  for n in $(seq 0 $((nodes - 1))); do
    load --url "${urls[$n]}" --token "${tokens[$n]}" --pid "${servers[$n]}" --stored 0 --seconds "$seconds" \
      --only "$key" >"$work/$name.${proc[$n]}.out" &
    gens+=("$!")
  done
  for n in $(seq 0 $((nodes - 1))); do
    wait "${gens[$n]}" || { say "the generator against $side process ${proc[$n]^^} failed:"; cat "$work/$name.${proc[$n]}.out" >&2; exit 1; }
    echo "-- process ${proc[$n]^^} --"
    grep -v '^RESULT' "$work/$name.${proc[$n]}.out"
  done
  stop_servers
  if [ "$side" = ours ]; then
    local refused
    refused="$(cat "$work/$name".*.log | grep -c '^agent:' || true)"
    echo "$side $nodes $key $round $refused" >>"$work/refused.txt"
    [ "$refused" = 0 ] || echo "-- our agent's writes refused: $refused, e.g. $(cat "$work/$name".*.log | grep -m1 '^agent:') --"
  fi
}

for round in $(seq "$rounds"); do
  if (( round % 2 )); then order=(ours sdk); else order=(sdk ours); fi
  for key in send intake; do
    for nodes in 1 2; do
      for side in "${order[@]}"; do measure "$side" "$nodes" "$key" "$round"; done
    done
  done
done

echo
echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $pinning; PostgreSQL $pg_version (fsync and synchronous_commit on); ${seconds} s per case, $stored Tasks stored first, $rounds round(s); load average at the start: $load_before, at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| case (c=64 per generator) | nodes | ours on PostgreSQL | SDK cluster store | ours / SDK |"
echo "| --- | ---: | ---: | ---: | ---: |"
# Per case and node count: per side and round the generators' rates added and the higher
# p99; then the medians over the rounds and each round's ratio.
awk -v rounds="$rounds" "$fleet_awk_median"'
  FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, part, ".") }
  $1 == "RESULT" {
    k = part[1] SUBSEP part[2] SUBSEP $2 SUBSEP part[4]
    rate[k] += $3
    if ($5 + 0 > p99[k] + 0) p99[k] = $5
  }
  END {
    label["send"] = "`POST /message:send`, blocking until COMPLETED"
    label["intake"] = "`POST /message:send`, `returnImmediately`"
    split("send intake", keys, " ")
    for (c = 1; c <= 2; c++) for (nodes = 1; nodes <= 2; nodes++) {
      key = keys[c]
      ro = ""; qo = ""; rs = ""; qs = ""; ratios = ""; each = ""
      for (r = 1; r <= rounds; r++) {
        o = "ours" SUBSEP nodes SUBSEP key SUBSEP r; s = "sdk" SUBSEP nodes SUBSEP key SUBSEP r
        ro = ro " " rate[o]; qo = qo " " p99[o]; rs = rs " " rate[s]; qs = qs " " p99[s]
        x = (rate[s] > 0 ? rate[o] / rate[s] : 0)
        ratios = ratios " " x; each = each (r > 1 ? ", " : "") sprintf("%.2f", x)
      }
      printf "| %s | %d | %.0f req/s, p99 %.1f ms | %.0f req/s, p99 %.1f ms | **%.2f×** (%s) |\n",
        label[key], nodes, median(ro), median(qo), median(rs), median(qs), median(ratios), each
    }
  }' "$work"/*.out
echo
echo "Our agent's writes refused (all cases and rounds, fill included): $(awk '{ n += $5 } END { print n + 0 }' "$work/refused.txt")$( [ -n "${FLEET_OURS_ARGS:-}" ] && echo "; ours ran with $FLEET_OURS_ARGS")."
echo
awk 'FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, part, ".") } $1 == "RESULT" { print "FLEET", part[1], part[2], part[3], part[4], part[5], $3, $4, $5, $6 }' \
  "$work"/*.out
