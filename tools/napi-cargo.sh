#!/usr/bin/env bash
# The cargo that `npm run build` (napi build) runs, so that napi's build and every cargo
# command after `. tools/setup.sh` share one fingerprint: the crate compiles once.
#
# napi-build's build script asks cargo to track two variables that napi sets for its own
# cargo only: NAPI_TYPE_DEF_TMP_FOLDER (where napi-derive writes the type definitions; one
# folder per build configuration) and NAPI_FORCE_BUILD_A2A_TASK_PLANE (a fresh time when
# that folder lacks this crate's definitions, else unset). A plain `cargo test` without
# them, or napi's next build with the second unset again, made cargo rerun the build script
# and compile the crate again. This keeps the folder napi chose and the last forced time in
# target/napi-env.sh, which setup.sh exports for every later cargo command.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$repo/target/napi-env.sh"
force_var=NAPI_FORCE_BUILD_A2A_TASK_PLANE
force="${!force_var:-}"
if [ -z "$force" ] && [ -f "$state" ]; then
  force="$(sed -n "s/^export $force_var=//p" "$state")"
fi
export "$force_var=${force:-0}"
folder="${NAPI_TYPE_DEF_TMP_FOLDER:?napi build sets NAPI_TYPE_DEF_TMP_FOLDER; run this through npm run build}"
mkdir -p "$repo/target"
printf 'export NAPI_TYPE_DEF_TMP_FOLDER=%q\nexport %s=%q\n' "$folder" "$force_var" "${!force_var}" >"$state"
unset CARGO
cargo "$@"
# Two compilations that ran at once with the same folder (the library and its unit tests,
# under cargo test or clippy) each wrote every definition: napi needs each line once.
defs="$folder/a2a-task-plane"
if [ -f "$defs" ]; then
  awk '!seen[$0]++' "$defs" >"$defs.unique" && mv "$defs.unique" "$defs"
fi
