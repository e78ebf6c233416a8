"""The official A2A Python client, a2a-sdk from PyPI, unchanged, against a running listener.

One run speaks one protocol binding (JSONRPC with the SDK's default ClientConfig, HTTP+JSON
or GRPC), chosen by the SDK from the Agent Card the way any caller's client does, and plays
every scenario on it, printing one JSON line per scenario:

    {"binding": "HTTP+JSON", "scenario": "blocking_send_completes", "ok": true, "detail": "..."}

preceded by one line naming the scenarios it is about to run. It exits 1 when a scenario
failed. __test__/python-sdk.test.ts runs it once per binding the card lists, with the agent
the scenarios expect (see that file): a message's first word picks what the agent does.

    python scenarios.py --url http://127.0.0.1:PORT --binding HTTP+JSON \
        --token TOKEN --other-token TOKEN_OF_ANOTHER_PRINCIPAL

With `--ca FILE` (the listener serving TLS, `--url https://…`) every client trusts that CA's
certificates: httpx with it as its `verify` context, gRPC over `grpc.aio.secure_channel`.
`--only A,B` plays those scenarios only.
"""

import argparse
import asyncio
import functools
import json
import ssl
import sys
import uuid

from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

import grpc
import httpx

from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2

from a2a.client import (
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2A_ERROR_REASONS, A2AError
from a2a.utils.grpc_status import status_from_call


BINDINGS = ('JSONRPC', 'HTTP+JSON', 'GRPC')
VERSION_HEADER = 'A2A-Version'
#: Each scenario ends within this, or fails saying so.
SCENARIO_SECONDS = 30.0


class Failed(Exception):
    """A scenario's expectation did not hold."""


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise Failed(what)


def state_name(state: int) -> str:
    return TaskState.Name(state)


class Bearer(CredentialService):
    """The caller's token for the card's bearer scheme (the SDK's AuthInterceptor sends it)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def get_credentials(self, security_scheme_name: str, context: ClientCallContext | None) -> str | None:
        return self._token


def last_version_wins(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """Keeps only the last `a2a-version` in a call's metadata.

    The SDK's gRPC transport always sends its own `a2a-version: 1.0` and appends the caller's
    service parameters after it; over HTTP the caller's header replaces the default instead.
    With this, a caller's `A2A-Version` means the same on every binding.
    """
    pairs = list(details.metadata or ())
    versions = [value for key, value in pairs if key == VERSION_HEADER.lower()]
    if len(versions) < 2:
        return details
    kept = [(key, value) for key, value in pairs if key != VERSION_HEADER.lower()]
    kept.append((VERSION_HEADER.lower(), versions[-1]))
    return details._replace(metadata=grpc.aio.Metadata(*kept))


# grpc.aio files an interceptor under its first matching kind only: one class per kind.
class LastVersionWinsUnary(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(last_version_wins(client_call_details), request)


class LastVersionWinsStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(last_version_wins(client_call_details), request)


def grpc_channel(url: str, *, ca: bytes | None = None) -> grpc.aio.Channel:
    """A loopback channel to the card's gRPC interface (`host:port`, or a URL): plaintext,
    or TLS trusting `ca`."""
    target = urlsplit(url).netloc if '://' in url else url
    interceptors = [LastVersionWinsUnary(), LastVersionWinsStream()]
    if ca is None:
        return grpc.aio.insecure_channel(target, interceptors=interceptors)
    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    return grpc.aio.secure_channel(target, credentials, interceptors=interceptors)


def client_config(binding: str, *, streaming: bool, ca: str | None = None) -> ClientConfig:
    """The SDK's ClientConfig for a binding (JSON-RPC is what its default config speaks),
    trusting the CA in the file `ca` when given."""
    http = {}
    if ca is not None:
        # The SDK leaves a client it was given open: Run.close closes it.
        http['httpx_client'] = httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca))
    if binding == 'JSONRPC':
        return ClientConfig(streaming=streaming, **http)
    if binding == 'HTTP+JSON':
        return ClientConfig(streaming=streaming, supported_protocol_bindings=['HTTP+JSON'], **http)
    roots = None
    if ca is not None:
        with open(ca, 'rb') as pem:
            roots = pem.read()
    factory = functools.partial(grpc_channel, ca=roots)
    return ClientConfig(streaming=streaming, supported_protocol_bindings=['GRPC'], grpc_channel_factory=factory, **http)


async def connect(url: str, binding: str, token: str, *, streaming: bool, ca: str | None = None) -> tuple[Client, ClientConfig]:
    config = client_config(binding, streaming=streaming, ca=ca)
    client = await ClientFactory(config).create_from_url(url, interceptors=[AuthInterceptor(Bearer(token))])
    return client, config


def user_message(text: str, *, task_id: str = '', context_id: str = '', message_id: str = '') -> Message:
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
    )


def text_of(parts) -> str:
    return ''.join(part.text for part in parts)


def reason_of(err: BaseException) -> str | None:
    """The A2A reason of an error as the client surfaced it.

    The SDK raises a typed error for each reason it knows; for any other (here
    DUPLICATE_MESSAGE_ID) it raises A2AClientError, and the reason is read from the
    response it chained: the HTTP body's google.rpc.Status or the gRPC status details.
    Over JSON-RPC the SDK keeps only our ErrorInfo's metadata, not its reason: None.
    """
    if type(err) in A2A_ERROR_REASONS:
        return A2A_ERROR_REASONS[type(err)]
    cause = err.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        try:
            details = cause.response.json().get('error', {}).get('details', [])
        except ValueError:
            return None
        for detail in details:
            if isinstance(detail, dict) and detail.get('@type', '').endswith('google.rpc.ErrorInfo'):
                return detail.get('reason')
    if isinstance(cause, grpc.aio.AioRpcError):
        status = status_from_call(cause)
        for detail in status.details if status else ():
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info.reason
    return None


async def fails_with(reason: str, call: Callable[[], Awaitable[object]], what: str) -> BaseException:
    """Runs `call`, which must fail with the A2A error `reason`; returns that error."""
    try:
        await call()
    except Failed:
        raise
    except Exception as err:  # noqa: BLE001 - any client error is an observation
        got = reason_of(err)
        expect(got == reason, f'{what}: expected {reason}, got {type(err).__name__} ({got}): {err}')
        return err
    raise Failed(f'{what}: expected {reason}, but it succeeded')


async def drain(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


class Run:
    """The clients of one binding: the caller's (blocking and streaming) and another principal's."""

    def __init__(self, blocking: Client, streaming: Client, other: Client, other_streaming: Client, http: list[httpx.AsyncClient]):
        self.http = http
        self.blocking = blocking
        self.streaming = streaming
        self.other = other
        self.other_streaming = other_streaming

    async def send(self, message: Message, *, return_immediately: bool = False, client: Client | None = None) -> StreamResponse:
        """A blocking `SendMessage`: its one response, a Task or a Message."""
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
        )
        events = await drain((client or self.blocking).send_message(request))
        expect(len(events) == 1, f'a blocking send answers once, got {len(events)} responses')
        return events[0]

    async def send_task(self, message: Message, *, return_immediately: bool = False) -> Task:
        response = await self.send(message, return_immediately=return_immediately)
        expect(response.HasField('task'), f'a Task, got {MessageToDict(response)}')
        return response.task

    async def close(self) -> None:
        for client in (self.blocking, self.streaming, self.other, self.other_streaming):
            await client.close()
        for http in self.http:
            await http.aclose()


SCENARIOS: list[Callable[[Run], Awaitable[str]]] = []


def scenario(fn: Callable[[Run], Awaitable[str]]) -> Callable[[Run], Awaitable[str]]:
    SCENARIOS.append(fn)
    return fn


@scenario
async def blocking_send_completes(run: Run) -> str:
    task = await run.send_task(user_message('summarise the report'))
    expect(task.status.state == TaskState.TASK_STATE_COMPLETED, f'COMPLETED, got {state_name(task.status.state)}')
    names = [artifact.name for artifact in task.artifacts]
    expect(names == ['progress', 'answer'], f'the artifacts progress, answer; got {names}')
    answer = text_of(task.artifacts[-1].parts)
    expect(answer == 'echo: summarise the report', f'the echo answer, got {answer!r}')
    return f'task {task.id} COMPLETED with {names}'


@scenario
async def direct_message(run: Run) -> str:
    sent = user_message('direct hello')
    first = await run.send(sent)
    expect(first.HasField('message'), f'a direct Message, got {MessageToDict(first)}')
    expect(first.message.role == Role.ROLE_AGENT, 'the reply is the agent\'s')
    expect(text_of(first.message.parts).startswith('direct answer '), f'the responder\'s text, got {text_of(first.message.parts)!r}')
    expect(first.message.task_id == '', 'no Task exists for a direct answer')
    again = await run.send(sent)
    expect(MessageToDict(again) == MessageToDict(first), 'the same messageId answers the first reply verbatim')
    streamed = await drain(run.streaming.send_message(SendMessageRequest(message=user_message('direct streamed'))))
    kinds = [event.WhichOneof('payload') for event in streamed]
    expect(kinds == ['message'], f'a stream of one Message, got {kinds}')
    return 'a Message, the same one again for its messageId, and one Message on a stream'


@scenario
async def stream_to_terminal_event(run: Run) -> str:
    events = await drain(run.streaming.send_message(SendMessageRequest(message=user_message('stream this'))))
    seen = []
    for event in events:
        kind = event.WhichOneof('payload')
        if kind == 'task':
            seen.append(f'task:{state_name(event.task.status.state)}')
        elif kind == 'status_update':
            seen.append(f'status:{state_name(event.status_update.status.state)}')
        elif kind == 'artifact_update':
            seen.append(f'artifact:{event.artifact_update.artifact.name}')
        else:
            seen.append(kind or 'empty')
    expect(bool(seen) and seen[0].startswith('task:'), f'the Task comes first, got {seen}')
    expect(seen[-1] in ('status:TASK_STATE_COMPLETED', 'task:TASK_STATE_COMPLETED'), f'the stream ends on COMPLETED, got {seen}')
    answered = [e for e in events if e.HasField('artifact_update') and e.artifact_update.artifact.name == 'answer']
    in_task = [a for e in events if e.HasField('task') for a in e.task.artifacts if a.name == 'answer']
    expect(bool(answered or in_task), f'the answer artifact is streamed, got {seen}')
    return ' '.join(seen)


@scenario
async def get_with_history_length(run: Run) -> str:
    task = await run.send_task(user_message('remember this'))
    full = await run.blocking.get_task(GetTaskRequest(id=task.id))
    expect(full.id == task.id, 'the Task asked for')
    expect(len(full.history) >= 1, 'the full history has the message')
    expect(text_of(full.history[0].parts) == 'remember this', 'the history starts with the message sent')
    last = await run.blocking.get_task(GetTaskRequest(id=task.id, history_length=1))
    expect(len(last.history) == 1, f'historyLength 1 gives one message, got {len(last.history)}')
    expect(MessageToDict(last.history[0]) == MessageToDict(full.history[-1]), 'historyLength keeps the newest messages')
    expect(last.status.state == TaskState.TASK_STATE_COMPLETED, 'the same durable state')
    return f'{len(full.history)} messages in full, 1 with historyLength 1'


@scenario
async def list_with_paging(run: Run) -> str:
    first = await run.send_task(user_message('page one'))
    context = first.context_id
    ids = {first.id}
    for text in ('page two', 'page three'):
        task = await run.send_task(user_message(text, context_id=context))
        expect(task.context_id == context, 'a new Task in the same context')
        ids.add(task.id)
    expect(len(ids) == 3, 'three distinct Tasks')
    page = await run.blocking.list_tasks(ListTasksRequest(context_id=context, page_size=2))
    expect(len(page.tasks) == 2, f'a page of 2, got {len(page.tasks)}')
    expect(page.total_size == 3, f'totalSize 3, got {page.total_size}')
    expect(page.next_page_token != '', 'a nextPageToken for the rest')
    rest = await run.blocking.list_tasks(ListTasksRequest(context_id=context, page_size=2, page_token=page.next_page_token))
    expect(len(rest.tasks) == 1, f'the last page has 1, got {len(rest.tasks)}')
    expect(rest.next_page_token == '', 'no token after the last page')
    listed = [task.id for task in [*page.tasks, *rest.tasks]]
    expect(sorted(listed) == sorted(ids), f'the pages list each Task once: {listed} vs {sorted(ids)}')
    return f'3 Tasks in pages of 2 + 1 (context {context})'


@scenario
async def input_required_then_continue(run: Run) -> str:
    asked = await run.send_task(user_message('ask which colour'))
    expect(asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f'INPUT_REQUIRED, got {state_name(asked.status.state)}')
    expect(text_of(asked.status.message.parts) == 'which one?', 'the question is the status message')
    answered = await run.send_task(user_message('the blue one', task_id=asked.id, context_id=asked.context_id))
    expect(answered.id == asked.id, 'the continuation settles the same Task')
    expect(answered.status.state == TaskState.TASK_STATE_COMPLETED, f'COMPLETED, got {state_name(answered.status.state)}')
    expect(text_of(answered.artifacts[-1].parts) == 'echo: the blue one', 'the agent worked the answer')
    return f'task {asked.id}: INPUT_REQUIRED, then COMPLETED'


@scenario
async def subscribe_then_cancel(run: Run) -> str:
    task = await run.send_task(user_message('work until canceled'), return_immediately=True)
    expect(task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), 'not settled yet')
    subscribed = asyncio.Event()
    seen: list[str] = []

    async def follow() -> None:
        async for event in run.streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
            if event.HasField('task'):
                seen.append(f'task:{state_name(event.task.status.state)}')
            elif event.HasField('status_update'):
                seen.append(f'status:{state_name(event.status_update.status.state)}')
            subscribed.set()

    following = asyncio.create_task(follow())
    holding = asyncio.create_task(subscribed.wait())
    # The cancel goes out once the subscriber holds the Task (or its stream already ended).
    await asyncio.wait([following, holding], return_when=asyncio.FIRST_COMPLETED)
    holding.cancel()
    canceled = await run.blocking.cancel_task(CancelTaskRequest(id=task.id))
    expect(canceled.status.state == TaskState.TASK_STATE_CANCELED, f'CANCELED, got {state_name(canceled.status.state)}')
    await following
    expect(bool(seen) and seen[0].startswith('task:'), f'the subscription starts with the Task, got {seen}')
    expect(seen[-1] == 'status:TASK_STATE_CANCELED', f'the subscription ends on CANCELED, got {seen}')
    await fails_with(
        'UNSUPPORTED_OPERATION',
        lambda: drain(run.streaming.subscribe(SubscribeToTaskRequest(id=task.id))),
        'subscribing to a terminal Task',
    )
    return ' '.join(seen)


@scenario
async def cancel_terminal_and_unknown(run: Run) -> str:
    done = await run.send_task(user_message('finish quickly'))
    expect(done.status.state == TaskState.TASK_STATE_COMPLETED, 'a terminal Task')
    await fails_with('TASK_NOT_CANCELABLE', lambda: run.blocking.cancel_task(CancelTaskRequest(id=done.id)), 'canceling a COMPLETED Task')
    unknown = f'no-such-task-{uuid.uuid4()}'
    await fails_with('TASK_NOT_FOUND', lambda: run.blocking.cancel_task(CancelTaskRequest(id=unknown)), 'canceling an unknown Task')
    await fails_with('TASK_NOT_FOUND', lambda: run.blocking.get_task(GetTaskRequest(id=unknown)), 'reading an unknown Task')
    return 'TaskNotCancelableError, TaskNotFoundError'


async def fails_as_conflict(run: Run, changed: Message) -> BaseException:
    """The same messageId with another payload is the conflict error, never a replay."""
    try:
        response = await run.send(changed)
    except Failed:
        raise
    except Exception as err:  # noqa: BLE001 - the error is the observation
        reason = reason_of(err)
        # No typed error names the conflict: the client's generic error (HTTP+JSON, gRPC) or
        # JSON-RPC's invalid-params error (-32602), the reason in its data.
        expect(isinstance(err, A2AError), f'an A2A error for the conflict, got {type(err).__name__}')
        if reason in (None, 'INVALID_PARAMS'):
            # JSON-RPC: -32602 with our ErrorInfo in `data`, of which the SDK keeps only
            # the metadata; the message still names the reused messageId.
            expect(changed.message_id in str(err), f'the conflict names the reused messageId, got {err}')
        else:
            expect(reason == 'DUPLICATE_MESSAGE_ID', f'DUPLICATE_MESSAGE_ID, got {reason}: {err}')
        return err
    raise Failed(f'a changed payload under a used messageId was answered: {MessageToDict(response)}')


@scenario
async def reused_message_id(run: Run) -> str:
    sent = user_message('only once')
    first = await run.send_task(sent)
    again = await run.send_task(sent)
    expect(again.id == first.id, f'the same messageId and payload give the prior Task {first.id}, got {again.id}')
    expect(again.status.state == TaskState.TASK_STATE_COMPLETED, 'the prior Task as it is now')
    changed = user_message('something else', message_id=sent.message_id)
    err = await fails_as_conflict(run, changed)
    return f'prior Task {first.id} again; a changed payload: {type(err).__name__}'


@scenario
async def unsupported_version(run: Run) -> str:
    def speaking(version: str) -> ClientCallContext:
        return ClientCallContext(service_parameters={VERSION_HEADER: version})

    task = await run.send_task(user_message('version check'))
    await fails_with(
        'VERSION_NOT_SUPPORTED',
        lambda: run.blocking.get_task(GetTaskRequest(id=task.id), context=speaking('9.9')),
        'GetTask with A2A-Version 9.9',
    )
    await fails_with(
        'VERSION_NOT_SUPPORTED',
        lambda: drain(run.blocking.send_message(SendMessageRequest(message=user_message('from the future')), context=speaking('0.3'))),
        'SendMessage with A2A-Version 0.3',
    )
    read = await run.blocking.get_task(GetTaskRequest(id=task.id), context=speaking('1.0'))
    expect(read.id == task.id, 'A2A-Version 1.0 is served')
    return 'VersionNotSupportedError for 9.9 and 0.3; 1.0 served'


@scenario
async def principal_isolation(run: Run) -> str:
    mine = await run.send_task(user_message('ask privately'))
    expect(mine.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, 'a Task waiting for its caller')
    await fails_with('TASK_NOT_FOUND', lambda: run.other.get_task(GetTaskRequest(id=mine.id)), "another caller's GetTask")
    await fails_with('TASK_NOT_FOUND', lambda: run.other.cancel_task(CancelTaskRequest(id=mine.id)), "another caller's CancelTask")
    await fails_with(
        'TASK_NOT_FOUND',
        lambda: drain(run.other_streaming.subscribe(SubscribeToTaskRequest(id=mine.id))),
        "another caller's SubscribeToTask",
    )
    await fails_with(
        'TASK_NOT_FOUND',
        lambda: run.send(user_message('my answer', task_id=mine.id, context_id=mine.context_id), client=run.other),
        "another caller's continuation",
    )
    theirs = await run.other.list_tasks(ListTasksRequest(page_size=100))
    expect(all(task.id != mine.id for task in theirs.tasks), "another caller's ListTasks does not show the Task")
    still = await run.blocking.get_task(GetTaskRequest(id=mine.id))
    expect(still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f'untouched, got {state_name(still.status.state)}')
    done = await run.send_task(user_message('my own answer', task_id=mine.id, context_id=mine.context_id))
    expect(done.status.state == TaskState.TASK_STATE_COMPLETED, 'its caller still continues it')
    return f'task {mine.id}: not found, listed, canceled, subscribed to or continued by another caller'


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--url', required=True, help='the agent base URL (its Agent Card is at /.well-known/agent-card.json)')
    parser.add_argument('--binding', required=True, choices=BINDINGS)
    parser.add_argument('--token', required=True, help="the caller's bearer token")
    parser.add_argument('--other-token', required=True, help="another principal's bearer token")
    parser.add_argument('--ca', help='a PEM file of the CA to trust (the listener serving TLS)')
    parser.add_argument('--only', help='the scenarios to play, comma-separated (default: all)')
    args = parser.parse_args()
    scenarios = SCENARIOS
    if args.only:
        wanted = args.only.split(',')
        unknown = set(wanted) - {fn.__name__ for fn in SCENARIOS}
        if unknown:
            parser.error(f'--only: no scenario named {", ".join(sorted(unknown))}')
        scenarios = [fn for fn in SCENARIOS if fn.__name__ in wanted]
    http: list[httpx.AsyncClient] = []

    async def client(token: str, streaming: bool) -> Client:
        made, config = await connect(args.url, args.binding, token, streaming=streaming, ca=args.ca)
        if args.ca is not None:
            http.append(config.httpx_client)
        return made

    run = Run(
        await client(args.token, False),
        await client(args.token, True),
        await client(args.other_token, False),
        await client(args.other_token, True),
        http,
    )
    print(json.dumps({'binding': args.binding, 'scenarios': [fn.__name__ for fn in scenarios]}), flush=True)
    failed = 0
    try:
        for fn in scenarios:
            line = {'binding': args.binding, 'scenario': fn.__name__}
            try:
                line['detail'] = await asyncio.wait_for(fn(run), SCENARIO_SECONDS)
                line['ok'] = True
            except asyncio.TimeoutError:
                line.update(ok=False, detail=f'did not end within {SCENARIO_SECONDS:.0f} s')
            except Failed as err:
                line.update(ok=False, detail=str(err))
            except Exception as err:  # noqa: BLE001 - reported, and the next scenario runs
                line.update(ok=False, detail=f'{type(err).__name__}: {err}')
            failed += not line['ok']
            print(json.dumps(line), flush=True)
    finally:
        await run.close()
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
