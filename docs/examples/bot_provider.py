"""An example bot provider for Switchboard's Bot API (docs/bot-api.md).

Standard library only; Python 3.11+. It receives the service's events (B1,
``POST /<token>``), answers 200 at once, and replies afterwards with B2
requests to ``<webhook URL prefix><token>``:

- a first message: a greeting (TEXT) and two buttons (BUTTONS, with a text
  fallback for channels without buttons);
- an e-mail address in a message: CLIENT_INFO with it, and a TEXT thanks;
- "Talk to a person", "agent", "human": INVITE_AGENT;
- "help": MARKDOWN with a text fallback;
- AGENT_UNAVAILABLE: a TEXT asking for an e-mail address;
- AGENT_JOINED and CHAT_CLOSED: logged, nothing sent.

Run it (``make run`` starts it with the demo's values)::

    python docs/examples/bot_provider.py --port 8010 \\
        --webhook-url-prefix http://127.0.0.1:8000/webhooks/<provider_id>/ \\
        --token <token>

Each option may be given as an environment variable instead: BOT_HOST,
BOT_PORT, BOT_WEBHOOK_URL_PREFIX, BOT_TOKEN, and BOT_SIGNING_SECRET (the
``whsec_…`` secret of the bot's attachment; when set, B1 requests whose
Standard Webhooks signature does not verify are refused with 401).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import os
import queue
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger("bot_provider")

MAX_BODY_BYTES = 64 * 1024
SIGNATURE_TOLERANCE_SECONDS = 300
B2_TIMEOUT_SECONDS = 10
B2_TRIES = 3
LANES = 4  # reply threads; one chat's replies always go through the same one, in order

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
WANTS_PERSON = re.compile(r"\b(talk to a person|person|agent|human|operator)\b", re.IGNORECASE)
WANTS_HELP = re.compile(r"^\s*help\b", re.IGNORECASE)
WANTS_ORDER = re.compile(r"\border status\b", re.IGNORECASE)
BUTTONS = ("Order status", "Talk to a person")


class BadEvent(ValueError):
    """A B1 request this bot cannot read; answered 400 invalid_request."""


@dataclass(frozen=True)
class Envelope:
    """A B1 event (docs/bot-api.md, "The envelope")."""

    event: str
    id: str
    chat_id: str
    client_id: str
    site_id: str = ""
    agents_online: bool = False
    sender: dict[str, Any] = field(default_factory=dict)
    channel: dict[str, Any] = field(default_factory=dict)
    message: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        return str((self.message or {}).get("text") or "")


def _string(data: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise BadEvent(f"{name} must be a non-empty string")
    return str(value)


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise BadEvent(f"{name} must be an object")
    return value


def parse_envelope(data: Any) -> Envelope:
    """The envelope of a B1 body; ``BadEvent`` when it is not one."""
    if not isinstance(data, dict):
        raise BadEvent("the body must be a JSON object")
    message = data.get("message")
    if data.get("event") == "CLIENT_MESSAGE":
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            raise BadEvent("a CLIENT_MESSAGE needs message.text")
    elif message is not None and not isinstance(message, dict):
        raise BadEvent("message must be an object")
    return Envelope(
        event=_string(data, "event"),
        id=_string(data, "id"),
        chat_id=_string(data, "chat_id"),
        client_id=_string(data, "client_id"),
        site_id=_string(data, "site_id", required=False),
        agents_online=data.get("agents_online") is True,
        sender=_object(data, "sender"),
        channel=_object(data, "channel"),
        message=message,
    )


def signature_ok(secret: str, headers: Any, body: bytes) -> bool:
    """The recipe of docs/signatures.md: Standard Webhooks, HMAC-SHA256."""
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    signatures = headers.get("webhook-signature", "")
    if not (msg_id and timestamp.isdigit() and signatures):
        return False
    if abs(time.time() - int(timestamp)) > SIGNATURE_TOLERANCE_SECONDS:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, entry.removeprefix("v1,"))
        for entry in signatures.split()
        if entry.startswith("v1,")
    )


# --- what the bot says ---------------------------------------------------------


def _message(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields, "timestamp": int(time.time())}


def text(words: str) -> dict[str, Any]:
    return _message("TEXT", text=words)


def greeting_buttons() -> dict[str, Any]:
    return _message(
        "BUTTONS",
        title="What can I do for you?",
        buttons=[{"text": label} for label in BUTTONS],
        text='Reply "Order status" or "Talk to a person".',  # for channels without buttons
    )


def help_markdown() -> dict[str, Any]:
    return _message(
        "MARKDOWN",
        content=(
            "I can **look up an order** or *find you a person*.\n"
            "Write your e-mail address, or see [our help pages](https://example.com/help)."
        ),
        text=(  # for channels that cannot show Markdown
            "I can look up an order or find you a person. Write your e-mail address, "
            "or see our help pages: https://example.com/help"
        ),
    )


@dataclass
class Reply:
    """One B2 request to send: the event and its fields besides the ids."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)


class Conversation:
    """What the bot answers to each event. Remembers the chats it greeted."""

    def __init__(self) -> None:
        self._greeted: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def _first_time(self, chat_id: str) -> bool:
        with self._lock:
            if chat_id in self._greeted:
                return False
            self._greeted[chat_id] = None
            if len(self._greeted) > 10_000:
                self._greeted.popitem(last=False)
            return True

    def answer(self, envelope: Envelope) -> list[Reply]:
        if envelope.event == "CLIENT_MESSAGE":
            return self._client_message(envelope)
        if envelope.event == "AGENT_UNAVAILABLE":
            return [
                Reply(
                    "BOT_MESSAGE",
                    {
                        "message": text(
                            "Sorry, nobody is free right now. Leave your e-mail address "
                            "and someone will get back to you."
                        )
                    },
                )
            ]
        return []  # AGENT_JOINED, CHAT_CLOSED and anything newer: nothing to say

    def _client_message(self, envelope: Envelope) -> list[Reply]:
        words = envelope.text
        first = self._first_time(envelope.chat_id)
        email = EMAIL.search(words)
        if email:
            address = email.group(0)
            return [
                Reply("CLIENT_INFO", {"email": address}),
                Reply("BOT_MESSAGE", {"message": text(f"Thanks! We will write to {address}.")}),
            ]
        if WANTS_PERSON.search(words):
            return [
                Reply("BOT_MESSAGE", {"message": text("Let me find a person for you.")}),
                Reply("INVITE_AGENT"),
            ]
        if WANTS_HELP.search(words):
            return [Reply("BOT_MESSAGE", {"message": help_markdown()})]
        if WANTS_ORDER.search(words):
            return [
                Reply(
                    "BOT_MESSAGE",
                    {"message": text("Write the e-mail address you ordered with, please.")},
                )
            ]
        opening = "Hello! I am the example bot." if first else "Sorry, I did not get that."
        return [
            Reply("BOT_MESSAGE", {"message": text(opening)}),
            Reply("BOT_MESSAGE", {"message": greeting_buttons()}),
        ]


# --- B2: sending ---------------------------------------------------------------


class Service:
    """POSTs B2 events to ``<webhook URL prefix><token>``, retrying what may pass later."""

    def __init__(self, *, webhook_url_prefix: str, token: str) -> None:
        self.url = webhook_url_prefix + token

    def send(self, body: dict[str, Any]) -> bool:
        data = json.dumps(body).encode()
        # One key for every try of this event: a retry after a lost answer is done once.
        key = str(uuid.uuid4())
        for attempt in range(1, B2_TRIES + 1):
            request = urllib.request.Request(  # noqa: S310 (the URL is the operator's http(s) URL)
                self.url,
                data=data,
                method="POST",
                headers={"Content-Type": "application/json", "Idempotency-Key": key},
            )
            try:
                with urllib.request.urlopen(request, timeout=B2_TIMEOUT_SECONDS) as answer:  # noqa: S310
                    logger.info("bot.b2_sent event=%s status=%s", body["event"], answer.status)
                    return True
            except urllib.error.HTTPError as error:
                detail = error.read(2000).decode("utf-8", "replace")
                retry = error.code == 429 or error.code >= 500
                logger.warning(
                    "bot.b2_refused event=%s status=%s answer=%s", body["event"], error.code, detail
                )
                wait = _retry_after(error.headers.get("Retry-After"), attempt)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                logger.warning("bot.b2_failed event=%s error=%s", body["event"], error)
                retry, wait = True, _retry_after(None, attempt)
            if not retry or attempt == B2_TRIES:
                return False
            time.sleep(wait)
        return False


def _retry_after(header: str | None, attempt: int) -> float:
    if header and header.strip().isdigit():
        return min(float(header), 30.0)
    return float(attempt)


# --- B1: receiving ---------------------------------------------------------------


class Bot:
    """The bot: reads events, answers them in the background, one lane per chat."""

    def __init__(self, *, token: str, service: Service, signing_secret: str = "") -> None:
        self.token = token
        self.service = service
        self.signing_secret = signing_secret
        self.conversation = Conversation()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._seen_lock = threading.Lock()
        self._lanes: list[queue.Queue[Envelope]] = [queue.Queue() for _ in range(LANES)]
        for lane in self._lanes:
            threading.Thread(target=self._work, args=(lane,), daemon=True).start()

    def seen_before(self, event_id: str) -> bool:
        """A redelivered event (its first answer was lost) is answered only once."""
        with self._seen_lock:
            if event_id in self._seen:
                return True
            self._seen[event_id] = None
            if len(self._seen) > 10_000:
                self._seen.popitem(last=False)
            return False

    def accept(self, envelope: Envelope) -> None:
        lane = int(hashlib.sha256(envelope.chat_id.encode()).hexdigest(), 16) % LANES
        self._lanes[lane].put(envelope)

    def _work(self, lane: queue.Queue[Envelope]) -> None:
        while True:
            envelope = lane.get()
            try:
                self.handle(envelope)
            except Exception:
                logger.exception(
                    "bot.handle_failed event=%s chat=%s", envelope.event, envelope.chat_id
                )

    def handle(self, envelope: Envelope) -> None:
        logger.info(
            "bot.event_received event=%s id=%s chat=%s agents_online=%s",
            envelope.event, envelope.id, envelope.chat_id, envelope.agents_online,
        )  # fmt: skip
        for reply in self.conversation.answer(envelope):
            body = {
                "event": reply.event,
                "id": str(uuid.uuid4()),
                "chat_id": envelope.chat_id,
                "client_id": envelope.client_id,
                **reply.fields,
            }
            if not self.service.send(body):
                break  # the rest would make no sense without this one


class Handler(BaseHTTPRequestHandler):
    server: BotServer
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        self._answer(status, {"error": {"code": code, "message": message}})

    def do_POST(self) -> None:
        bot = self.server.bot
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            self.close_connection = True
            return self._error(411, "invalid_request", "Content-Length is required")
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            return self._error(413, "payload_too_large", "the body is too large")
        body = self.rfile.read(int(length))
        if not hmac.compare_digest(self.path.encode(), f"/{bot.token}".encode()):
            return self._error(401, "invalid_client", "unknown token")
        if bot.signing_secret and not signature_ok(bot.signing_secret, self.headers, body):
            return self._error(401, "invalid_client", "the signature does not verify")
        try:
            envelope = parse_envelope(json.loads(body))
        except (ValueError, RecursionError) as error:  # BadEvent and bad JSON alike
            return self._error(400, "invalid_request", str(error))
        self._answer(200, {"result": "ok"})  # at once; the answer follows by B2
        if not bot.seen_before(envelope.id):
            bot.accept(envelope)

    def _not_allowed(self) -> None:
        self.close_connection = True  # a body it may have sent is not read
        self._error(405, "method_not_allowed", "only POST is supported")

    do_GET = do_PUT = do_PATCH = do_DELETE = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:
        # The path holds the token: log the method and the status only.
        logger.debug("bot.http %s", self.command)


class BotServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], bot: Bot) -> None:
        super().__init__(address, Handler)
        self.bot = bot


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An example Switchboard bot provider.")
    parser.add_argument("--host", default=os.environ.get("BOT_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("BOT_PORT", "8010")))
    parser.add_argument(
        "--webhook-url-prefix",
        default=os.environ.get("BOT_WEBHOOK_URL_PREFIX", ""),
        help="the service's B2 URL up to the token: {PUBLIC_URL}/webhooks/{provider_id}/",
    )
    parser.add_argument("--token", default=os.environ.get("BOT_TOKEN", ""))
    parser.add_argument("--signing-secret", default=os.environ.get("BOT_SIGNING_SECRET", ""))
    options = parser.parse_args(argv)
    if not options.webhook_url_prefix.startswith(("http://", "https://")):
        parser.error("--webhook-url-prefix (or BOT_WEBHOOK_URL_PREFIX) must be an http(s) URL")
    if not options.token:
        parser.error("--token (or BOT_TOKEN) is required")
    if options.signing_secret:
        try:
            base64.b64decode(options.signing_secret.removeprefix("whsec_"), validate=True)
        except ValueError:
            parser.error("--signing-secret must be whsec_ followed by base64")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    prefix = options.webhook_url_prefix
    service = Service(webhook_url_prefix=prefix if prefix.endswith("/") else prefix + "/",
                      token=options.token)  # fmt: skip
    bot = Bot(token=options.token, service=service, signing_secret=options.signing_secret)
    server = BotServer((options.host, options.port), bot)
    logger.info("bot.listening address=http://%s:%s/<token>", options.host, server.server_port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
