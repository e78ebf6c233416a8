#!/usr/bin/env bash
# Runs the product from a clone: a resident Pi with this package loaded as an extension and
# the A2A listener on loopback. Installs and builds what it needs first (when nothing
# changed, no cargo runs). `--help` for the options.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<'EOF'
usage: bash tools/run.sh [--headless] [--demo] [pi arguments...]

Runs the resident Pi agent with the A2A task plane and its listener (installing and
building what it needs first).

  (no option)   interactive: Pi's screen in this terminal; your configured model works
                the tasks. Needs a terminal; without one, use --headless.
  --headless    as a service: no terminal, no input, no screen. Stays up until SIGTERM or
                SIGINT, then stops cleanly (exit 0); exits 1 with one line if the task
                plane cannot start. Log lines go to stderr and to the log file.
                Only --provider/--model/--thinking are passed on.
  --demo        the OFFLINE DEMO AGENT (a scripted stand-in for a model, not an LLM): no
                key, no network. Combines with --headless.
  -h, --help    this text (changes nothing)

Other arguments go to `pi` unchanged (e.g. --model anthropic/claude-sonnet-4-5; Pi's own
--mode rpc or -p also run without a terminal, but end when their input ends).

Variables it sets when they are unset (see the README for every variable):
  A2A_SERVER=1             serve A2A over HTTP
  A2A_CREDENTIALS_PATH     ${XDG_DATA_HOME:-~/.local/share}/outfitter/channels/a2a-credentials.json,
                           created once (mode 0600) with a random token for principal 'local'
The listener binds A2A_HOST:A2A_PORT (default 127.0.0.1:8788); the store is
CHANNELS_TASK_STORE_PATH (default ${XDG_DATA_HOME:-~/.local/share}/outfitter/channels/task-plane);
logs go to <store>/logs/task-plane.log (A2A_LOG_DIR moves them; A2A_LOG filters them).
EOF
}

demo=0
headless=0
pi_mode=0 # Pi's own non-interactive modes (print, json, rpc) need no terminal
args=()
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --demo) demo=1 ;;
    --headless) headless=1 ;;
    -p | --print | --mode | --mode=*) pi_mode=1; args+=("$arg") ;;
    *) args+=("$arg") ;;
  esac
done

if [ "$headless" = 0 ] && [ "$pi_mode" = 0 ] && { [ ! -t 0 ] || [ ! -t 1 ]; }; then
  suggestion="bash tools/run.sh --headless"
  [ "$demo" = 1 ] && suggestion="$suggestion --demo"
  echo "run.sh: no terminal here (stdin or stdout is not a TTY), so Pi's interactive screen cannot run; to run the resident as a service, use: $suggestion" >&2
  exit 2
fi

. "$repo/tools/setup.sh"

# The installed package's command, which sets the same defaults (and prints no token).
if [ "$headless" = 1 ]; then
  node_args=()
  [ "$demo" = 1 ] && node_args+=(--demo)
  exec node "$repo/bin/a2a-task-plane.js" resident ${node_args[@]+"${node_args[@]}"} ${args[@]+"${args[@]}"}
fi

export A2A_SERVER="${A2A_SERVER:-1}"
if [ -z "${A2A_CREDENTIALS_PATH:-}" ]; then
  data="${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels"
  export A2A_CREDENTIALS_PATH="$data/a2a-credentials.json"
  if [ ! -f "$A2A_CREDENTIALS_PATH" ]; then
    mkdir -p "$data"
    chmod 700 "$data"
    token="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
    (umask 077 && printf '{"credentials": [{"token": "%s", "principal": "local"}]}\n' "$token" >"$A2A_CREDENTIALS_PATH")
    echo "Created $A2A_CREDENTIALS_PATH (mode 0600) with a bearer token for principal 'local'."
    echo "  $token"
    echo "(shown once; it stays in that file)"
  fi
fi

pi="$repo/node_modules/.bin/pi"
if [ "$demo" = 1 ]; then
  echo "Using the OFFLINE DEMO AGENT: a scripted stand-in for a model, not an LLM."
  exec "$pi" -e "$repo" -e "$repo/extensions/demo-agent.ts" --provider a2a-demo --model scripted-demo-agent ${args[@]+"${args[@]}"}
fi
exec "$pi" -e "$repo" ${args[@]+"${args[@]}"}
