#!/usr/bin/env bash
# npm pack / npm publish (the package's prepack script): the addon current for this
# checkout (built if it is not, see tools/setup.sh), without its debug info.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/tools/setup.sh"
# The debug info (line tables, for developers' backtraces) is five sixths of the file.
for addon in "$repo"/a2a-task-plane.*.node; do
  strip --strip-debug "$addon"
done
