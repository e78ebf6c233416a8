"""The fleet benchmark's peer (issue #38, item 7): the official A2A Python SDK's server on its
PostgreSQL cluster store, driven by the same load generator as ours (benches/http.rs).

What runs: a2a-sdk 1.3's own pieces and nothing of ours. Its REST app (HTTP+JSON, the routes
of `create_rest_routes`, the binding the load generator speaks by default) at
<base>/a2a, and its JSON-RPC app at <base>/jsonrpc (both listed in the Agent Card, where the
generator finds the JSON-RPC one), on its `DefaultRequestHandler` (= DefaultRequestHandlerV2)
over its cluster store: `VersionedDatabaseTaskStore` (SQLAlchemy's asyncio engine over
asyncpg; tables `tasks`, `task_versions`, `task_events`, made at start if missing) and
`DatabaseTaskEventStream` on the same engine. The executor settles each Task at once: it
publishes one COMPLETED Task with one text artifact "done" and no status message, the work
benches/sdk-server.ts's executor does for the JS SDK. Served by uvicorn (uvloop, httptools,
no access log), one process, one event loop.

Auth: one bearer token, like ours (benches/ours-server.ts gives the listener a credentials
file with one token for principal "bench"). benches/sdk-server.ts checks none (the JS SDK's
`UserBuilder.noAuthentication`); here Starlette's own AuthenticationMiddleware checks the
`Authorization: Bearer` header against the token and answers 401 otherwise, and the SDK's
default call-context builder takes the principal ("bench") as the owner its store scopes
every row by, as ours scopes by principal.

The SDK's cluster, as 1.3 builds it (read from its sources, a2a/server/cluster/):
- A send is worked by the process that took it: the executor runs in that process's
  in-memory `ActiveTaskRegistry`. Nothing hands a Task to another process: no queue, no
  lease. A process that dies mid-Task leaves the Task in its last committed state for good.
- Each event the executor publishes is saved before any subscriber sees it: one
  transaction that compare-and-swaps the Task's row in `task_versions` (version + 1), writes
  the `tasks` row and appends the event to `task_events`, committed before the event goes
  to the waiting request. So a blocking send's answer (and a returnImmediately send's,
  which waits for the executor's first event) comes after a commit of the Task; with
  PostgreSQL's defaults (fsync, synchronous_commit on) that commit is on disk. Nothing is
  written at acceptance before the executor's first event.
- The event stream crosses processes only through the database: `DatabaseTaskEventStream`
  does not publish (the store's transaction already appended the event); a subscriber on
  another process (SubscribeToTask for a Task running elsewhere) gets the stored snapshot,
  then polls `task_events` every 0.5 s. A blocking send or a stream is always answered by
  the process that runs the executor, so the benchmark's cases never cross processes; a
  GetTask on any process reads the shared table.
- No idempotency on messageId: the same message sent twice, to one process or two, makes
  two Tasks (Task ids are minted per request).
Several processes of this script on one database = that cluster. Start them one after
another (each makes the tables if missing; two makers at once can collide).

Run (the venv: `python="$(bash tools/python-peer.sh)"`):
  "$python" benches/sdk-cluster-server.py --db postgresql://USER@127.0.0.1:PORT/DB [--port N]
    → prints "LISTENING <HTTP+JSON interface url> <token>"
The database URL may come from A2A_PEER_DB_URL instead of --db; the token is
A2A_PEER_TOKEN, or the benchmark's usual one. `--memory` instead of a database: the SDK's
InMemoryTaskStore, the same server otherwise, to tell the database's share of the cost.
Not part of the product.
"""

import argparse
import asyncio
import hmac
import os
import signal
import socket
import sys
import uuid

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    SimpleUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Mount
import uvicorn

BENCH_TOKEN = "bench-token-0123456789abcdef"
PRINCIPAL = "bench"
CARD_PATH = "/.well-known/agent-card.json"


class SettleAtOnce(AgentExecutor):
    """Publishes one COMPLETED Task with one text artifact and no status message."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        status.timestamp.GetCurrentTime()
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=status,
            history=[context.message] if context.message is not None else [],
            artifacts=[
                Artifact(
                    artifact_id=str(uuid.uuid4()),
                    name="answer",
                    parts=[Part(text="done", media_type="text/plain")],
                )
            ],
        )
        await event_queue.enqueue_event(task)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


class OneBearerToken(AuthenticationBackend):
    """The one token of the benchmark, as principal PRINCIPAL; anything else is refused."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def authenticate(self, conn):
        if conn.url.path == CARD_PATH:
            return None  # the Agent Card is public, as ours serves it
        given = conn.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            raise AuthenticationError(
                "Authorization must be 'Bearer <the token this server printed>'"
            )
        return AuthCredentials(["authenticated"]), SimpleUser(PRINCIPAL)


def refused(_conn, err: Exception) -> JSONResponse:
    return JSONResponse({"error": {"code": 401, "message": str(err)}}, status_code=401)


def asyncpg_url(url: str, source: str) -> str:
    """The SQLAlchemy URL for a postgres:// or postgresql:// URL; anything else is an error
    naming where the URL came from."""
    for scheme in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+asyncpg://" + url[len(scheme) :]
    sys.exit(
        f"sdk-cluster-server: {source} is '{url}', not a PostgreSQL URL: give "
        "postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE"
    )


def agent_card(base: str) -> AgentCard:
    return AgentCard(
        name="sdk-cluster-peer",
        description="official Python SDK server on its PostgreSQL cluster store, for comparison",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/a2a", protocol_binding="HTTP+JSON", protocol_version="1.0"),
            AgentInterface(url=f"{base}/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="settle",
                name="settle at once",
                description="completes each Task at once with the text 'done'",
                tags=["benchmark"],
            )
        ],
    )


async def open_store(db_url: str | None):
    """The SDK's cluster store and event stream on PostgreSQL at `db_url` (and the engine to
    dispose of), or with `db_url` None its InMemoryTaskStore alone (--memory)."""
    if db_url is None:
        return InMemoryTaskStore(), None, None
    engine = create_async_engine(db_url)
    store = VersionedDatabaseTaskStore(engine)
    stream = DatabaseTaskEventStream(engine)
    try:
        await store.initialize()
        await stream.initialize()
    except Exception as err:  # noqa: BLE001 - said to the person, then out
        await engine.dispose()
        shown = make_url(db_url).render_as_string(hide_password=True)
        sys.exit(
            f"sdk-cluster-server: could not open the database at {shown}: {err}. Check that "
            "PostgreSQL runs there and the user may create tables in that database."
        )
    return store, stream, engine


async def serve(db_url: str | None, port: int, token: str) -> None:
    store, stream, engine = await open_store(db_url)

    async def dispose() -> None:
        if engine is not None:
            await engine.dispose()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as err:
        await dispose()
        sys.exit(f"sdk-cluster-server: cannot listen on 127.0.0.1:{port} (--port): {err}")
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"

    card = agent_card(base)
    handler = DefaultRequestHandler(
        agent_executor=SettleAtOnce(),
        task_store=store,
        agent_card=card,
        event_stream=stream,
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            Mount("/a2a", routes=create_rest_routes(handler)),
            *create_jsonrpc_routes(handler, rpc_url="/jsonrpc"),
        ],
        middleware=[
            Middleware(AuthenticationMiddleware, backend=OneBearerToken(token), on_error=refused)
        ],
    )
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        # The load generator keeps its connections between cases.
        timeout_keep_alive=120,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    # uvicorn's own handlers are for its run(); here SIGTERM/SIGINT end serve() below.
    server.install_signal_handlers = lambda: None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        print(f"LISTENING {base}/a2a {token}", flush=True)

    announcer = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        announcer.cancel()
        await handler.aclose()
        await dispose()
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="PostgreSQL URL (else A2A_PEER_DB_URL)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="the SDK's InMemoryTaskStore instead of PostgreSQL (what the database costs)",
    )
    args = parser.parse_args()
    if args.memory:
        if args.db:
            sys.exit("sdk-cluster-server: --memory and --db exclude each other: give one")
        url, source = None, None
    elif args.db:
        url, source = args.db, "--db"
    elif os.environ.get("A2A_PEER_DB_URL"):
        url, source = os.environ["A2A_PEER_DB_URL"], "A2A_PEER_DB_URL"
    else:
        sys.exit(
            "sdk-cluster-server: no database: give --db postgresql://USER@HOST:PORT/DB "
            "or set A2A_PEER_DB_URL"
        )
    token = os.environ.get("A2A_PEER_TOKEN", BENCH_TOKEN)
    if "A2A_PEER_TOKEN" in os.environ and (len(token) < 16 or any(c.isspace() for c in token)):
        sys.exit(
            "sdk-cluster-server: A2A_PEER_TOKEN is set but unusable: give at least 16 "
            "characters without spaces, or unset it for the benchmark's token"
        )
    asyncio.run(serve(None if url is None else asyncpg_url(url, source), args.port, token))


if __name__ == "__main__":
    main()
