# Sourced by benches/fleet-peer.sh and benches/fleet-compare.sh: what the two fleet
# benchmarks share, written once. Not run on its own. Sourcing it defines functions and
# `say`, and starts nothing; the script calls them in this order:
#   fleet_args <default rounds> "$@"  -h/--help prints the script's header comment and exits
#                                     0; otherwise sets seconds (default 5), stored (2000)
#                                     and rounds, or exits 2 with a line naming the bad one.
#   fleet_build <what runs on CPU 1>  sets python (the peer's venv), sources tools/setup.sh,
#                                     builds benches/http.rs (sets bench), and the CPU
#                                     pinning: server_cpu, load_cpu, pinning (its sentence).
#   fleet_pg_start                    a throwaway PostgreSQL for the run: sets pg_bin,
#                                     pg_port, work (a temp dir, gone at exit), pg_version,
#                                     as_pg (runuser as `postgres` when root), pids (server
#                                     processes to stop); at exit (the EXIT trap) every pid
#                                     in `pids` killed and waited for, PostgreSQL stopped
#                                     (pg_ctl stop -D on its own data dir), the temp dir
#                                     removed.
# Then: make_db <name>, pg_url <name>, stop_servers, fleet_listening <what> <log> (waits for
# the LISTENING line of the server `pid` logging to <log>; sets url and token), and
# $fleet_awk_median (an awk `median(list)` to put before a program).
# PostgreSQL: Debian's (the newest /usr/lib/postgresql/*/bin), or PG_BIN=<its bin dir>; its
# defaults stand (fsync and synchronous_commit on), max_connections 200; not pinned to a CPU.
fleet_name="$(basename "$0" .sh)"
say() { echo "$fleet_name: $*" >&2; }

fleet_args() {
  local default_rounds="$1"
  shift
  case "${1:-}" in
    -h | --help)
      # The script's header: its comment lines after the #! line, without the `# `.
      sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
  esac
  (($# <= 3)) || { say "takes at most 3 arguments (seconds per case, Tasks stored first, rounds), not $#: $*; see --help"; exit 2; }
  seconds="${1:-5}"
  stored="${2:-2000}"
  rounds="${3:-$default_rounds}"
  [[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { say "seconds per case must be a positive whole number, not '$seconds'"; exit 2; }
  [[ "$stored" =~ ^[0-9]+$ ]] || { say "Tasks stored must be a whole number, not '$stored'"; exit 2; }
  [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { say "rounds must be a positive whole number, not '$rounds'"; exit 2; }
}

fleet_build() {
  python="$(bash "$repo/tools/python-peer.sh")"
  . "$repo/tools/setup.sh"
  say() { echo "$fleet_name: $*" >&2; } # setup.sh has its own
  cd "$repo"
  bench="$(cargo bench --bench http --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)"
  [ -x "$bench" ] || { say "could not build benches/http.rs (cargo bench --bench http --no-run)"; exit 1; }
  if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    server_cpu=(taskset -c 1)
    load_cpu=(taskset -c 0)
    pinning="$1 on CPU 1, load on CPU 0, PostgreSQL not pinned"
  else
    server_cpu=()
    load_cpu=()
    pinning="NOT pinned (needs 2 CPUs and taskset): the figures are not one-core figures"
  fi
}

stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
fleet_cleanup() {
  stop_servers
  if [ -n "$pg_started" ]; then "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}

fleet_pg_start() {
  pg_bin="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
  [ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/pg_ctl" ] || {
    say "no PostgreSQL server binaries (initdb, pg_ctl) in '${pg_bin:-/usr/lib/postgresql/*/bin}': install Debian's postgresql package (apt-get install postgresql), or set PG_BIN to the bin dir of one"
    exit 1
  }
  work="$(mktemp -d)"
  pids=()
  pg_started=""
  as_pg=()
  if [ "$(id -u)" = 0 ]; then
    as_pg=(runuser -u postgres --)
    chown postgres "$work"
  fi
  trap fleet_cleanup EXIT

  # A free port on 127.0.0.1 for PostgreSQL (the servers take port 0 and print theirs).
  pg_port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "${as_pg[@]}" "$pg_bin/initdb" -D "$work/pg" -U postgres -A trust --no-instructions >"$work/initdb.log" 2>&1 || {
    say "initdb failed:"; cat "$work/initdb.log" >&2; exit 1
  }
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$work -c max_connections=200" start >/dev/null || {
    say "PostgreSQL did not start:"; cat "$work/pg.log" >&2; exit 1
  }
  pg_started=1
  # `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)` → 15.18
  pg_version="$("$pg_bin/postgres" --version | awk '{print $3}')"
  say "PostgreSQL $pg_version on 127.0.0.1:$pg_port (data in $work/pg)"
}
make_db() { "${as_pg[@]}" "$pg_bin/psql" -q -h 127.0.0.1 -p "$pg_port" -U postgres -c "CREATE DATABASE $1" postgres; }
pg_url() { echo "postgresql://postgres@127.0.0.1:$pg_port/$1"; }

# fleet_listening <what> <log>: waits (30 s at most) for the LISTENING line of the server
# `pid` that logs to <log>; sets url and token, or exits 1 with its log.
fleet_listening() {
  for _ in $(seq 300); do grep -q '^LISTENING' "$2" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  url="$(sed -n 's/^LISTENING \([^ ]*\).*/\1/p' "$2")"
  token="$(sed -n 's/^LISTENING [^ ]* *\(.*\)$/\1/p' "$2")"
  [ -n "$url" ] || { say "$1 did not start:"; cat "$2" >&2; exit 1; }
}

# The median of a space-separated list of numbers (insertion sort: a few rounds' values).
# shellcheck disable=SC2034 # used by the scripts that source this
fleet_awk_median='
  function median(list,    v, n, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }'
