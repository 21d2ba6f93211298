"""The web server's direct writer to an open response (config/web_server.py,
``WRITE_NOW``), as the live streams' hub uses it for heartbeats: what it
writes is framed as the application's own body writes are, in order between
them, and it writes nothing where it must not."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import RequestResponseCycle

from config.web_server import WriterNow
from tests.aio import run_async

HEARTBEAT = b": heartbeat\n\n"


class Transport:
    """What a cycle writes, kept."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


def cycle_for(request: bytes) -> tuple[RequestResponseCycle, Transport]:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(request)
    event = conn.next_event()
    assert isinstance(event, h11.Request)
    transport = Transport()
    scope: Any = {"method": event.method.decode(), "headers": list(event.headers)}
    cycle = RequestResponseCycle(
        scope=scope,
        conn=conn,
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test"),
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        on_response=lambda: None,
    )
    return cycle, transport


def body(data: bytes) -> dict[str, Any]:
    """The application's next piece of a response that goes on."""
    return {"type": "http.response.body", "body": data, "more_body": True}


def body_read_by_a_client(request: bytes, written: bytes) -> list[bytes]:
    """The body's pieces as an HTTP client reads what was written."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.receive_data(written)
    pieces = []
    while (event := client.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
        if isinstance(event, h11.Data):
            pieces.append(bytes(event.data))
        if isinstance(event, h11.EndOfMessage):
            break
    return pieces


def test_it_writes_chunks_between_the_application_s_own() -> None:
    request = b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"

    async def scenario() -> tuple[list[bool], bytes]:
        cycle, transport = cycle_for(request)
        write = WriterNow(cycle)
        said = [write(HEARTBEAT)]  # before the response began: nothing
        await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
        await cycle.send(body(b"retry: 2000\n\n"))  # type: ignore[arg-type]
        said += [write(HEARTBEAT), write(HEARTBEAT)]  # framed by h11, then the same again
        await cycle.send(body(b"id: 1\n\n"))  # type: ignore[arg-type]
        said.append(write(b": other\n\n"))
        cycle.flow.pause_writing()  # a client that reads too slowly: its writes wait
        said.append(write(HEARTBEAT))
        cycle.flow.resume_writing()
        await cycle.send({"type": "http.response.body", "body": b"", "more_body": False})
        said.append(write(HEARTBEAT))  # complete: nothing more
        return said, bytes(transport.written)

    said, written = run_async(scenario())

    assert said == [False, True, True, True, False, False]
    assert b"\r\ntransfer-encoding: chunked\r\n" in written.lower()
    pieces = body_read_by_a_client(request, written)
    assert pieces == [b"retry: 2000\n\n", HEARTBEAT, HEARTBEAT, b"id: 1\n\n", b": other\n\n"]


def test_an_http_1_0_client_gets_the_bytes_as_they_are() -> None:
    """No chunks for HTTP/1.0: the body runs until the connection closes."""

    async def scenario() -> tuple[bool, bytes]:
        cycle, transport = cycle_for(b"GET /stream HTTP/1.0\r\n\r\n")
        await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
        wrote = WriterNow(cycle)(HEARTBEAT) and WriterNow(cycle)(HEARTBEAT)
        return wrote, bytes(transport.written)

    wrote, written = run_async(scenario())

    assert wrote and written.endswith(b"\r\n\r\n" + HEARTBEAT + HEARTBEAT)


def test_nothing_is_written_to_a_closing_connection_or_a_head_request() -> None:
    async def scenario() -> list[bool]:
        said = []
        cycle, transport = cycle_for(b"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
        said.append(WriterNow(cycle)(HEARTBEAT))
        cycle, transport = cycle_for(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
        transport.closing = True
        said.append(WriterNow(cycle)(HEARTBEAT))
        transport.closing, cycle.disconnected = False, True
        said.append(WriterNow(cycle)(HEARTBEAT))
        return said

    assert run_async(scenario()) == [False, False, False]


def test_the_server_hands_each_request_its_writer() -> None:
    """Through the web process's own protocol (config/web_server.py): the
    application finds the writer in its scope and writes between its events."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from config.web_server import WRITE_NOW, HeaderTimeoutH11Protocol

    class SocketTransport(Transport):
        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return default

        def pause_reading(self) -> None: ...

        def resume_reading(self) -> None: ...

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send(body(b"retry: 2000\n\n"))
        assert scope["extensions"][WRITE_NOW](HEARTBEAT)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    request = b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"

    async def scenario() -> bytes:
        config = Config(app=app, lifespan="off", log_config=None)
        protocol = HeaderTimeoutH11Protocol(config, ServerState(), {})
        transport = SocketTransport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.data_received(request)
        await asyncio.gather(*protocol.tasks)
        protocol.connection_lost(None)
        return bytes(transport.written)

    written = run_async(scenario())

    assert body_read_by_a_client(request, written) == [b"retry: 2000\n\n", HEARTBEAT]
