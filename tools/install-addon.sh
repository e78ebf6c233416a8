#!/usr/bin/env bash
# The package's npm prepare script: npm runs it in a checkout (`pi install git:…` clones and
# runs `npm install --omit=dev` there) and before packing, never when a packed package is
# installed (that one has its prebuilt addon). Without an addon for this platform it builds
# one from source with cargo, or says in one line what to install. tools/setup.sh, which
# builds the addon with napi itself, sets A2A_TASK_PLANE_NO_INSTALL_BUILD for its npm ci.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "a2a-task-plane: $*" >&2; }
[ -z "${A2A_TASK_PLANE_NO_INSTALL_BUILD:-}" ] || exit 0

libc=gnu
if ldd --version 2>&1 | grep -qi musl; then libc=musl; fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform="linux-x64-$libc" ;;
  Linux-aarch64) platform="linux-arm64-$libc" ;;
  *) say "runs on Linux (x64 or arm64) only, not on $(uname -s)-$(uname -m)"; exit 1 ;;
esac
addon="$repo/a2a-task-plane.$platform.node"
[ ! -f "$addon" ] || exit 0

command -v cargo >/dev/null || {
  say "no prebuilt addon for $platform in this copy and no cargo to build one: install Rust (https://rustup.rs) so that cargo is on PATH, then install again"
  exit 1
}
say "no prebuilt addon for $platform: building it from source with cargo (the first build takes several minutes)…"
# The host's own target, and no napi type definitions (index.d.ts comes with the checkout),
# whatever the caller's shell exports for its other builds.
(cd "$repo" && env -u CARGO_BUILD_TARGET -u NAPI_TYPE_DEF_TMP_FOLDER cargo build --release --lib --locked)
cp "${CARGO_TARGET_DIR:-$repo/target}/release/liba2a_task_plane.so" "$addon.partial"
# Debug info is for developers' backtraces; an installed addon is a sixth of the size without.
strip --strip-debug "$addon.partial" 2>/dev/null || true
mv "$addon.partial" "$addon"
say "built $addon"
