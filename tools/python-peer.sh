#!/usr/bin/env bash
# Makes (once) the venv of the fleet benchmark's peer, benches/sdk-cluster-server.py: the
# official A2A Python SDK's server with its PostgreSQL cluster store, served by uvicorn
# (benches/python-peer/requirements.txt, hash-checked wheels), and prints its python.
# tools/python-client.sh does the work and the caching; this names the requirements dir and
# the modules the venv must import.
#
#   python="$(bash tools/python-peer.sh)"
#
# The lock is regenerated as tools/python-client.sh says, in benches/python-peer.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/python-client.sh" benches/python-peer \
  a2a.server.cluster.database_task_store a2a.server.routes asyncpg sqlalchemy.ext.asyncio \
  starlette sse_starlette uvicorn uvloop httptools
