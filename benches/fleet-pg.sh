# Sourced by benches/fleet-peer.sh and benches/fleet-compare.sh: a throwaway PostgreSQL for
# one benchmark run, and the bookkeeping to stop what the run starts. Not run on its own.
# Needs: `say`, `$python` (for a free port). Sets: pg_bin, pg_port, work (a temp dir, gone
# at exit), pg_version, as_pg (runuser as `postgres` when root), pids (server processes to stop).
# Provides: make_db <name>, pg_url <name>, stop_servers. At exit (the EXIT trap): every pid
# in `pids` killed and waited for, PostgreSQL stopped (pg_ctl stop -D on its own data
# dir), the temp dir removed.
# PostgreSQL: Debian's (the newest /usr/lib/postgresql/*/bin), or PG_BIN=<its bin dir>; its
# defaults stand (fsync and synchronous_commit on), max_connections 200; not pinned to a CPU.
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
stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
fleet_cleanup() {
  stop_servers
  if [ -n "$pg_started" ]; then "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
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
make_db() { "${as_pg[@]}" "$pg_bin/psql" -q -h 127.0.0.1 -p "$pg_port" -U postgres -c "CREATE DATABASE $1" postgres; }
pg_url() { echo "postgresql://postgres@127.0.0.1:$pg_port/$1"; }
