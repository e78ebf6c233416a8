#!/usr/bin/env bash
# Installs and builds everything the product and its tests need, on a fresh machine:
# the pinned Node 22 (from the npm registry), the npm dev dependencies (Pi, the napi-rs CLI,
# TypeScript) and the Rust addon. Idempotent and quick: when nothing changed it runs no
# cargo (nor needs one) and compiles nothing. Each long step says what it does on stderr;
# cargo's progress shows on a terminal.
#
# Source it to get Node 22 first on PATH and cargo aimed at the addon's build:
#   . tools/setup.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "setup: $*" >&2; }

PATH="$(bash "$repo/tools/ensure-node.sh"):$PATH"
export PATH

# One build for everything: napi builds the addon for the host's target triple, so every
# cargo command sourced after this (tests, clippy, benches) uses the same triple, and with
# it the same target directory and dependency builds. Named without rustc, which a service
# account may not have.
case "$(uname -m)" in
  x86_64) CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu ;;
  aarch64) CARGO_BUILD_TARGET=aarch64-unknown-linux-gnu ;;
  *) CARGO_BUILD_TARGET="$(rustc -vV | sed -n 's/^host: //p')" ;;
esac
export CARGO_BUILD_TARGET

# npm ci only when the lock file changed since the last install. The package's own install
# script (which builds the addon for `pi install git:`) stands aside: the napi build below
# builds it here.
stamp="$repo/node_modules/.task-plane-lock"
if ! cmp -s "$repo/package-lock.json" "$stamp" 2>/dev/null; then
  say "installing npm packages (Pi, the napi-rs CLI, TypeScript; about 15 s)…"
  (cd "$repo" && A2A_TASK_PLANE_NO_INSTALL_BUILD=1 npm ci --no-audit --no-fund --loglevel=error) || {
    say "npm ci failed (output above); check that the npm registry is reachable, then run this again"
    exit 1
  }
  cp "$repo/package-lock.json" "$stamp"
fi

# The addon: a2a-task-plane.<platform>.node, plus the generated index.js / index.d.ts. It
# is current when the files it is built from are byte for byte those of its last build.
sources_digest() {
  (cd "$repo" && find Cargo.toml Cargo.lock build.rs package.json src proto -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}
built="$repo/target/addon-sources.sha256"
addon="$(ls "$repo"/a2a-task-plane.*.node 2>/dev/null | head -n 1 || true)"
digest="$(sources_digest)"
if [ -n "$addon" ] && [ "$(cat "$built" 2>/dev/null)" = "$digest" ]; then
  : # current: no cargo at all
else
  command -v cargo >/dev/null || { say "cargo is needed to build the addon (install Rust from https://rustup.rs), then run this again"; exit 1; }
  mkdir -p "$repo/target"
  log="$repo/target/napi-build.log"
  if [ -z "$addon" ]; then
    say "building the Rust addon (the first build compiles ~130 crates: several minutes on 2 cores)…"
  else
    say "building the Rust addon (only what changed)…"
  fi
  if [ -t 2 ]; then
    # On a terminal cargo draws its own progress bar; errors stay on screen.
    (cd "$repo" && npm run --silent build >/dev/null) || {
      say "building the Rust addon failed (errors above); fix them, or run 'npm run build' to see them again"
      exit 1
    }
  else
    (cd "$repo" && npm run --silent build >/dev/null 2>"$log") || {
      tail -n 60 "$log" >&2
      say "building the Rust addon failed (the last lines of $log are above; the whole log is there)"
      exit 1
    }
  fi
  echo "$digest" >"$built"
fi

# The variables napi's build ran cargo with (see tools/napi-cargo.sh): every cargo command
# after this one shares its fingerprint, so none compiles the crate again.
if [ -f "$repo/target/napi-env.sh" ]; then
  . "$repo/target/napi-env.sh"
fi
