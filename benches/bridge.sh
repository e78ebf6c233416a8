#!/usr/bin/env bash
# benches/bridge.ts under `perf record`, enabled for its measurement window only: per Task,
# the fsync-family syscalls (the writer's are its commits: WAL, synchronous=FULL), pwrite64s,
# context switches (sched_switch) and wake-ups between threads (sched_wakeup: the thread hops),
# each by thread group, next to bridge.ts's own report (Tasks/s, step latencies, CPU and
# switches per thread from /proc). Uses the addon as built; builds nothing. Needs perf and
# root (or perf_event_paranoid ≤ -1 for the tracepoints). The tracing itself costs about
# 0.5 ms of CPU per Task: take Tasks/s, latencies and CPU from a plain run of bridge.ts.
#
# Usage: bash benches/bridge.sh [--pin] [bridge.ts options: --tasks N --seconds S ...]
#   --pin   the measured process on CPU 1 (`taskset -c 1`), the HTTP load generator on CPU 0
# A benchmark, not a test: the machine's other load moves the numbers (see `uptime`).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

pin=()
args=()
for arg in "$@"; do
  case "$arg" in
    --pin) pin=(taskset -c 1) ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
[ ${#pin[@]} -eq 0 ] || args+=(--load-cpu 0)
command -v perf >/dev/null || { echo "bridge.sh: perf is needed (apt-get install linux-perf)" >&2; exit 1; }
ls "$repo"/a2a-task-plane.*.node >/dev/null 2>&1 || { echo "bridge.sh: no built addon in $repo (bash tools/setup.sh builds it)" >&2; exit 1; }
PATH="$(bash "$repo/tools/ensure-node.sh"):$PATH"
export PATH

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkfifo "$work/ctl" "$work/ack"
echo "bridge.sh: $(nproc) CPUs; $(uptime | sed 's/^ *//'); ${pin[*]:-not pinned}"
events=syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,sched:sched_switch,sched:sched_wakeup
BRIDGE_PERF_CTL="$work/ctl" BRIDGE_PERF_ACK="$work/ack" \
  perf record -q -o "$work/perf.data" -e "$events" -D -1 --control "fifo:$work/ctl,$work/ack" \
  -- "${pin[@]}" node benches/bridge.ts "${args[@]}" | tee "$work/out"

tasks="$(sed -n 's/^TASKS //p' "$work/out")"
pid="$(sed -n 's/^PID //p' "$work/out")"
[ -n "$tasks" ] && [ "$tasks" -gt 0 ] && [ -n "$pid" ] || { echo "bridge.sh: bridge.ts reported no TASKS/PID" >&2; exit 1; }
if perf report -i "$work/perf.data" --stats 2>/dev/null | grep -q 'LOST'; then
  echo "bridge.sh: WARNING: perf lost events; the counts below are low" >&2
fi

# One line per sample: "<comm> <pid>/<tid> <event>: <fields>" (comm may hold spaces).
perf script -i "$work/perf.data" -F comm,pid,tid,event,trace 2>/dev/null | awk -v tasks="$tasks" -v pid="$pid" '
  function group(p, t, comm) {
    if (p != pid) return "load generator (child process)";
    if (t == pid) return "node main (JS)";
    if (comm == "node") return "node (V8 platform)";
    if (comm == "task-plane-writ") return "task-plane-writer";
    if (comm == "task-plane-chec") return "task-plane-checkpoint";
    if (comm == "task-plane-wake") return "task-plane-wakes";
    if (comm == "task-plane-acti") return "task-plane-activity";
    return comm;
  }
  {
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) break;
    if (i > NF) next;
    comm = $1; for (j = 2; j < i; j++) comm = comm " " $j;
    split($i, ids, "/"); p = ids[1]; t = ids[2];
    event = $(i + 1); sub(/:$/, "", event); sub(/^[a-z_]+:/, "", event);
    g = group(p, t, comm);
    groupOf[t] = g;
    if (event == "sched_wakeup") {
      # The wakee: "comm=<name> pid=<tid> prio=... target_cpu=..."; its group once it runs.
      for (k = i + 2; k <= NF; k++) if ($k ~ /^pid=/) { wakee = substr($k, 5); break }
      woken[wakee, g]++;
      next;
    }
    count[g, event]++; total[event]++; groups[g] = 1;
  }
  END {
    split("sys_enter_fsync sys_enter_fdatasync sys_enter_pwrite64 sched_switch", cols, " ");
    printf "\nperf, per Task (%d Tasks in the window)      fsync fdatasync   pwrite64  switches\n", tasks;
    n = 0; for (g in groups) order[++n] = g;
    for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++)
      if (count[order[b], "sched_switch"] > count[order[a], "sched_switch"]) { x = order[a]; order[a] = order[b]; order[b] = x }
    for (a = 1; a <= n; a++) {
      g = order[a];
      printf "  %-38s", g;
      for (c = 1; c <= 4; c++) printf " %9.3f", count[g, cols[c]] / tasks;
      printf "\n";
    }
    printf "  %-38s", "this process";
    for (c = 1; c <= 4; c++) { s = 0; for (a = 1; a <= n; a++) if (order[a] !~ /^load generator/) s += count[order[a], cols[c]]; printf " %9.3f", s / tasks }
    printf "\n";
    w = "task-plane-writer";
    commits = count[w, "sys_enter_fsync"] + count[w, "sys_enter_fdatasync"];
    if (commits > 0)
      printf "  the writer: %.3f commits per Task (its fsyncs of the WAL) for 3 writes requested, %.1f pwrite64 per commit\n",
        commits / tasks, count[w, "sys_enter_pwrite64"] / commits;
    # Wake-ups of this process'"'"'s threads, by waker group → wakee group.
    for (key in woken) {
      split(key, kw, SUBSEP); wakee = kw[1]; waker = kw[2];
      if (!(wakee in groupOf)) continue;
      to = groupOf[wakee];
      if (to == "load generator (child process)") continue;
      hop[waker " → " to] += woken[key]; hops += woken[key];
    }
    printf "\nperf, wake-ups of this process'"'"'s threads per Task (waker → wakee, wakers of this process tree only: the thread hops): %.2f in all\n", hops / tasks;
    m = 0; for (h in hop) list[++m] = h;
    for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (hop[list[b]] > hop[list[a]]) { x = list[a]; list[a] = list[b]; list[b] = x }
    for (a = 1; a <= m; a++) if (hop[list[a]] / tasks >= 0.05) printf "  %-62s %7.2f\n", list[a], hop[list[a]] / tasks;
  }'
