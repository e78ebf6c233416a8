#!/usr/bin/env bash
# Makes (once) a Python venv with the official A2A Python SDK, `a2a-sdk` from PyPI, and
# prints the venv's python. The Node test __test__/python-sdk.test.ts calls it, so CI needs
# no step of its own.
#
#   python="$(bash tools/python-client.sh)"                       # the client (a2a-sdk[grpc])
#   python="$(bash tools/python-client.sh <requirements dir> [module ...])"
#
# With no argument what is installed is __test__/python-client/requirements.txt, the client
# the tests drive. With a requirements dir (relative to the repository, e.g.
# benches/python-peer, which tools/python-peer.sh passes) it is that dir's requirements.txt,
# and the venv is checked by importing those modules. Either way every package of the
# closure is pinned to one version and checked against its PyPI hashes (wheels only, no
# build step).
# The venv lives in ${A2A_PYCLIENT_CACHE:-$XDG_CACHE_HOME/a2a-task-plane}, named after the
# dir (pyclient for the client), the a2a-sdk version, the Python and a digest of
# requirements.txt, so a changed lock makes a new venv beside the old one. A cold run takes
# about 30 s (some 40 MB of wheels), a warm one well under a second.
# Another Python: A2A_PYTHON=/path/to/python3 (3.10 or newer, the SDK's minimum).
#
# To move to another a2a-sdk, edit requirements.in, then regenerate the lock with pip-tools
# (in that dir):
#   pip-compile --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
#     --no-emit-find-links -o requirements.txt requirements.in
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "python-client: $*" >&2; }
if [ $# -gt 0 ]; then
  req_dir="$1"
  shift
  name="$(basename "$req_dir")"
  checks=("$@")
else
  req_dir=__test__/python-client
  name=pyclient
  checks=(a2a.client a2a.client.transports.grpc)
fi
lock_file="$repo/$req_dir/requirements.txt"
[ -f "$lock_file" ] || {
  say "no $req_dir/requirements.txt in $repo: the first argument names a requirements dir of this repository (e.g. benches/python-peer), or leave it out for the client"
  exit 2
}
python="${A2A_PYTHON:-python3}"

command -v "$python" >/dev/null || {
  say "no '$python' on PATH: install Python 3.10 or newer (Debian: apt-get install python3 python3-venv), or set A2A_PYTHON to one"
  exit 1
}
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  say "$python is Python $py_version; a2a-sdk needs 3.10 or newer: install one, or set A2A_PYTHON to it"
  exit 1
}
sdk_version="$(sed -n 's/^a2a-sdk==\([^ ]*\).*/\1/p' "$lock_file")"
digest="$(sha256sum "$lock_file" | cut -c1-12)"
root="${A2A_PYCLIENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/a2a-task-plane}"
venv="$root/$name-a2a-sdk-$sdk_version-py$py_version-$digest"
ready="$venv/.installed"

if [ -f "$ready" ] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$root"
# Test runs of several worktrees may share the cache: one makes the venv, the others wait.
exec 9>"$venv.lock"
command -v flock >/dev/null && flock -w 600 9
if [ -f "$ready" ] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi

# Debian splits `venv` (its ensurepip) out of python3 into python3-venv. CI runs as root on
# Debian, so there it installs the package; anywhere else the message says what to install.
make_venv() { rm -rf "$venv" && "$python" -m venv "$venv" >&2; }
if ! make_venv; then
  rm -rf "$venv"
  deb_python="$(readlink -f "$(command -v "$python")")"
  if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [[ "$deb_python" == /usr/bin/* ]]; then
    say "'$python -m venv' failed; installing Debian's python3-venv (CI, as root)…"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$py_version-venv" python3-venv >&2
    make_venv
  else
    say "'$python -m venv' failed (output above). On Debian/Ubuntu: apt-get install python$py_version-venv; elsewhere install Python's venv module, or set A2A_PYTHON to a Python that has it"
    exit 1
  fi
fi

say "installing $req_dir/requirements.txt (a2a-sdk $sdk_version) from PyPI into $venv (first run only; about 30 s)…"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  --require-hashes --no-deps --only-binary=:all: -r "$lock_file" >&2; then
  rm -rf "$venv"
  say "pip could not install $lock_file (output above): check that PyPI is reachable, then run this again"
  exit 1
fi
import_line="import a2a"
for module in "${checks[@]}"; do import_line="$import_line, $module"; done
"$venv/bin/python" -c "$import_line" || {
  rm -rf "$venv"
  say "the installed a2a-sdk does not import (output above)"
  exit 1
}
echo "$digest" >"$ready"
echo "$venv/bin/python"
