"""A request's body must arrive in time and within its size: ASGI middleware around Django.

Under ASGI, Django reads a request's whole body (to a temporary file) before
any view runs, so a view's own size check (A2's CHAT_API_MAX_BODY_BYTES) would
only refuse a huge upload after receiving all of it. Here, before Django:

- a declared ``Content-Length`` over the path's limit is answered 413 at once;
- a body (chunked, or longer than declared) that grows past the limit is cut
  off with 413;
- the whole body must arrive within ``seconds`` of the headers, else 408.

Each answer is the service's error body, and the connection is closed (the
rest of the body may still be on its way). After the body, the application
may wait on ``receive`` as long as it likes (a live stream waits for the
client to leave).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class RequestRefused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class RequestLimits:
    def __init__(self, app: ASGIApp, *, seconds: float, max_bytes: Callable[[str], int]) -> None:
        self.app = app
        self.seconds = seconds
        self.max_bytes = max_bytes  # the largest body for a request path

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(send, self._too_large(limit))
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        received = 0
        body_complete = refused = answered = response_started = False

        async def receive_within_limits() -> Message:
            nonlocal body_complete, refused, answered, received
            if refused:
                return {"type": "http.disconnect"}
            if body_complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
                received += len(message.get("body", b""))
                if received > limit:
                    raise self._too_large(limit)
            except (TimeoutError, RequestRefused) as error:
                refused = True
                if not response_started:
                    answered = True
                    refusal = error if isinstance(error, RequestRefused) else self._timed_out()
                    await self._refuse(send, refusal)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_complete = True
            return message

        async def send_unless_refused(message: Message) -> None:
            nonlocal response_started
            if answered:
                return  # the refusal has answered in the application's place
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, receive_within_limits, send_unless_refused)

    def _too_large(self, limit: int) -> RequestRefused:
        return RequestRefused(413, "payload_too_large", f"the body is larger than {limit} bytes")

    def _timed_out(self) -> RequestRefused:
        return RequestRefused(
            408,
            "request_timeout",
            f"the request body did not arrive within {self.seconds:g} seconds",
        )

    async def _refuse(self, send: Send, refused: RequestRefused) -> None:
        body = json.dumps({"error": {"code": refused.code, "message": refused.message}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": refused.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    # The rest of the body may still be on its way: this
                    # connection cannot carry another request.
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
