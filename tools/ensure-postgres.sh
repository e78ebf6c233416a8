#!/usr/bin/env bash
# Prints the directory of the PostgreSQL server binaries (initdb, pg_ctl, postgres), which
# the PostgreSQL store's tests start a throwaway cluster with. Looks for Debian's
# `postgresql` package (/usr/lib/postgresql/<version>/bin, the newest version), then for
# `pg_ctl` on PATH. When neither is there it installs the package with apt-get if it runs
# as root, else it stops with one line saying what to install. Idempotent and quick when
# the server is present.
set -euo pipefail
say() { echo "ensure-postgres: $*" >&2; }

find_bin() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
    echo "$dir"
    return 0
  fi
  if command -v pg_ctl >/dev/null && command -v initdb >/dev/null; then
    dirname "$(command -v pg_ctl)"
    return 0
  fi
  return 1
}

if bin="$(find_bin)"; then
  echo "$bin"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  say "the PostgreSQL server is not installed (no /usr/lib/postgresql/<version>/bin, no pg_ctl on PATH);" \
      "install it (Debian/Ubuntu: 'sudo apt-get install -y postgresql'), then run this again"
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  say "the PostgreSQL server is not installed and this machine has no apt-get;" \
      "install PostgreSQL's server binaries (initdb, pg_ctl) with its package manager, then run this again"
  exit 1
fi
say "installing the PostgreSQL server (Debian's postgresql package; about a minute)…"
export DEBIAN_FRONTEND=noninteractive
# The tests start clusters of their own: the package's default cluster (a server on port
# 5432 started by the install) is not made, unless this machine's settings say otherwise
# (--force-confold keeps this file when the package brings its own).
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
fi
if ! { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql >&2; }; then
  say "apt-get could not install postgresql (output above); check that Debian's package mirror is reachable, then run this again"
  exit 1
fi
if ! bin="$(find_bin)"; then
  say "apt-get installed postgresql, but no initdb/pg_ctl is under /usr/lib/postgresql/*/bin; install the server binaries by hand"
  exit 1
fi
echo "$bin"
