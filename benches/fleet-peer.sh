#!/usr/bin/env bash
# The fleet benchmark's peer side (issue #38, item 7): the official Python SDK's server on
# its PostgreSQL cluster store (benches/sdk-cluster-server.py), as one process and as two
# processes on one database, under our load generator (benches/http.rs), on a throwaway
# PostgreSQL this script starts and stops itself. Prints, per case, the median over the
# rounds of the rate, p99 and peak RSS of one process and of two, and two against one.
#
# Usage: bash benches/fleet-peer.sh [seconds per case, default 5] [Tasks stored first,
#        default 2000] [rounds, default 3]; --help prints this header
#
# Cases (the generator's `--only send,get,intake`, 64 keep-alive connections):
# `POST /message:send` blocking until COMPLETED, `GET /tasks/{id}` of the Tasks the send
# case made, and intake, `POST /message:send` with `returnImmediately` (the SDK answers it
# once the executor's first event is stored; this executor's only event is the COMPLETED
# Task, so for the SDK it is the same work as the blocking send).
# CPUs: the peer processes on CPU 1 (`taskset -c 1`; two processes share it, so two
# measures what splitting one core's work over two processes on one database costs or
# gains, not a second machine), the load generator on CPU 0, PostgreSQL not pinned (its
# backends run where the scheduler puts them, on either CPU).
# Each round runs both set-ups, one right after the other, in alternating order, each on a
# fresh database of its own. One process: one database (fleet1_<round>), one generator.
# Two processes: another database (fleet2_<round>), peer A started, then peer B (each
# makes the tables if missing: one after the other); the generator fills the database
# through A (`--only intake --seconds 1`, the returnImmediately case, so the fill is all
# that matters), then two generators run at once for the same seconds, one per process,
# each pinned to CPU 0; the row shows their rates added. A GET goes to the process that made the Task (the generator reads the
# ids its own sends returned); every process reads the one shared table either way.
# PostgreSQL: Debian's (the newest /usr/lib/postgresql/*/bin), or PG_BIN=<its bin dir>;
# as root it runs as the `postgres` user. Its defaults stand: fsync and
# synchronous_commit on, so each commit the SDK waits for is on disk.
# A benchmark, not a test: other load on the machine moves the numbers.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The arguments, the build, the CPU pinning and PostgreSQL: benches/fleet-pg.sh.
. "$repo/benches/fleet-pg.sh"
fleet_args 3 "$@"
fleet_build "peer processes"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
fleet_pg_start

# peer <name> <database>: starts a peer process pinned, waits for its LISTENING line;
# sets url and pid.
peer() {
  local log="$work/$1.log"
  # Emptied here, not only by the redirection below: that one happens in the child, and a
  # LISTENING line left from an earlier start must not be read as this one's.
  : >"$log"
  "${server_cpu[@]}" "$python" benches/sdk-cluster-server.py --db "$(pg_url "$2")" >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  fleet_listening "peer $1" "$log"
}
load() { "${load_cpu[@]}" "$bench" --token "$token" --stored "$stored" "$@"; }

# one <round>: one process on a fresh database; its RESULT lines in $work/one.<round>.out.
one() {
  echo "== round $1 of $rounds: one process (database fleet1_$1) =="
  make_db "fleet1_$1"
  peer "one.$1" "fleet1_$1"
  load --url "$url" --pid "$pid" --seconds "$seconds" --only send,get,intake | tee "$work/one.$1.out" | grep -v '^RESULT'
  stop_servers
}

# two <round>: two processes on another fresh database, two generators at once; their
# RESULT lines in $work/a.<round>.out and $work/b.<round>.out.
two() {
  echo "== round $1 of $rounds: two processes on one database (fleet2_$1) =="
  make_db "fleet2_$1"
  peer "a.$1" "fleet2_$1"; local url_a="$url" pid_a="$pid"
  peer "b.$1" "fleet2_$1"; local url_b="$url" pid_b="$pid"
  echo "-- filling $stored Tasks through A --"
  load --url "$url_a" --seconds 1 --only intake >/dev/null
  load --url "$url_a" --pid "$pid_a" --seconds "$seconds" --only send,get,intake >"$work/a.$1.out" &
  local gen_a=$!
  load --url "$url_b" --pid "$pid_b" --seconds "$seconds" --only send,get,intake >"$work/b.$1.out" &
  local gen_b=$!
  wait "$gen_a" || { say "the generator against A failed:"; cat "$work/a.$1.out" >&2; exit 1; }
  wait "$gen_b" || { say "the generator against B failed:"; cat "$work/b.$1.out" >&2; exit 1; }
  for side in a b; do echo "-- process ${side^^} --"; grep -v '^RESULT' "$work/$side.$1.out"; done
  stop_servers
}

# Alternating order (one then two, then two then one, ...), so a drift of the shared
# host's speed over minutes weighs on both alike.
for round in $(seq "$rounds"); do
  if (( round % 2 )); then one "$round"; two "$round"; else two "$round"; one "$round"; fi
done

echo
echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $pinning; ${seconds} s per case, $stored Tasks stored, $rounds round(s); load average at the start: $load_before, at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| case (c=64 per generator) | SDK cluster, 1 process | SDK cluster, 2 processes (A + B) | 2 / 1 |"
echo "| --- | ---: | ---: | ---: |"
# Per case: the median over the rounds of each side's rate and p99 (two processes: A's and
# B's rates added round by round; the p99 the higher of the two), the highest peak RSS,
# and the median of the rounds' ratios with each round's in brackets.
awk -v rounds="$rounds" "$fleet_awk_median"'
  FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, part, "."); who = part[1]; round = part[2] }
  $1 == "RESULT" { rate[who, $2, round] = $3; p99[who, $2, round] = $5; rss[who, $2, round] = $6 }
  END {
    label["send"] = "`POST /message:send`, blocking until COMPLETED"
    label["get"] = "`GET /tasks/{id}`"
    label["intake"] = "`POST /message:send`, `returnImmediately`"
    split("send get intake", keys, " ")
    for (k = 1; k <= 3; k++) {
      key = keys[k]
      r1 = ""; q1 = ""; m1 = 0; r2 = ""; q2 = ""; m2 = 0; ratios = ""; each = ""
      for (r = 1; r <= rounds; r++) {
        one = rate["one", key, r]; two = rate["a", key, r] + rate["b", key, r]
        r1 = r1 " " one; q1 = q1 " " p99["one", key, r]
        r2 = r2 " " two; q2 = q2 " " (p99["a", key, r] + 0 > p99["b", key, r] + 0 ? p99["a", key, r] : p99["b", key, r])
        if (rss["one", key, r] + 0 > m1) m1 = rss["one", key, r] + 0
        if (rss["a", key, r] + 0 > m2) m2 = rss["a", key, r] + 0
        if (rss["b", key, r] + 0 > m2) m2 = rss["b", key, r] + 0
        x = (one > 0 ? two / one : 0)
        ratios = ratios " " x; each = each (r > 1 ? ", " : "") sprintf("%.2f", x)
      }
      printf "| %s | %.0f req/s, p99 %.1f ms, %d MB | %.0f req/s, p99 %.1f ms, %d MB each | **%.2f×** (%s) |\n",
        label[key], median(r1), median(q1), m1, median(r2), median(q2), m2, median(ratios), each
    }
  }' "$work"/*.out
# Machine-readable, for a fleet run that sets ours beside the peer: PEER <side> <round>
# <case> <req/s> <p50 ms> <p99 ms> <peak RSS MB>, side one, a or b.
awk 'FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, part, ".") } $1 == "RESULT" { print "PEER", part[1], part[2], $2, $3, $4, $5, $6 }' \
  "$work"/*.out
