"""A request body must arrive in time: ASGI middleware around Django.

A client that sends its headers and then trickles its body (or none) would
otherwise keep its request open for as long as it likes. Here the whole body
must arrive within ``seconds`` of the headers; if not, the answer is 408 with
the service's error body and the connection is closed. After the body, the
application may wait on ``receive`` as long as it likes (a live stream waits
for the client to leave).
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


class BodyTimeout:
    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        body_complete = timed_out = answered = response_started = False

        async def receive_in_time() -> Message:
            nonlocal body_complete, timed_out, answered
            if timed_out:
                return {"type": "http.disconnect"}
            if body_complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                timed_out = True
                if not response_started:
                    answered = True
                    await self._send_timeout(send)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_complete = True
            return message

        async def send_unless_timed_out(message: Message) -> None:
            nonlocal response_started
            if answered:
                return  # the 408 has answered in the application's place
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, receive_in_time, send_unless_timed_out)

    async def _send_timeout(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": "request_timeout",
                    "message": f"the request body did not arrive within {self.seconds:g} seconds",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 408,
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
