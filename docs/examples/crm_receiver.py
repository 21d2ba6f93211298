"""An example CRM receiving Switchboard's developer webhooks (docs/webhooks.md).

Standard library only; Python 3.11+. It takes every event at ``POST /``,
keeps the latest ones per visitor in memory, and answers:

- ``chat_accepted``: ``result`` "ok" with custom data about the visitor (the
  visitor number, how many chats, the page), an assign button
  (``enable_assign``) and a link to the visitor's card here (``crm_link``);
- every other event: ``{"result": "ok"}``.

``GET /`` lists the cards it has (one per visitor number, the newest event
first), each a link to ``GET /card/<visitor number>``: the events seen for
that visitor, newest first, ``chat_assigned`` included once the agent
pressed the assign button.

Run it (``make run`` starts it; seed_demo points the webhook here)::

    python docs/examples/crm_receiver.py --port 8020 [--signing-secret whsec_...]

With ``--signing-secret`` (or CRM_SIGNING_SECRET; the secret
``set_developer_webhook`` printed), a request whose Standard Webhooks
signature does not verify is refused with 401.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import html
import json
import logging
import os
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger("example_crm")

MAX_BODY = 1_000_000
TOLERANCE_SECONDS = 5 * 60


def signature_valid(secret: str, headers: Any, body: bytes) -> bool:
    """HMAC-SHA256 over ``id.timestamp.body`` with the base64 key after ``whsec_``."""
    webhook_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not webhook_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE_SECONDS:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{webhook_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    mine = base64.b64encode(digest).decode()
    offered = headers.get("webhook-signature", "").split()
    return any(hmac.compare_digest(mine, sig.removeprefix("v1,")) for sig in offered)


class Crm:
    """What the CRM knows: the last events per visitor number."""

    def __init__(self, base_url: str, signing_secret: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.signing_secret = signing_secret
        self.lock = threading.Lock()
        self.seen: defaultdict[str, deque[dict[str, Any]]] = defaultdict(lambda: deque(maxlen=50))

    def take(self, event: dict[str, Any]) -> dict[str, Any]:
        visitor = event.get("visitor") or {}
        number = str(visitor.get("number") or "unknown")
        with self.lock:
            self.seen[number].appendleft(event)
            self.seen[number] = self.seen.pop(number)  # the card with news goes last
        logger.info(
            "crm.event name=%s chat=%s visitor=%s",
            event.get("event_name"),
            event.get("chat_id", "-"),
            number,
        )
        if event.get("event_name") != "chat_accepted":
            return {"result": "ok"}
        page = event.get("page") or {}
        chats = visitor.get("chats_count", 0)
        came_from = page.get("title") or page.get("url") or "unknown"
        return {
            "result": "ok",
            "custom_data": [
                {"title": "Visitor", "content": f"#{number}, {chats} chat(s)"},
                {"title": "Came from", "content": came_from},
                {"title": "Plan", "content": "Demo CRM: no real customer data behind this"},
            ],
            "enable_assign": True,
            "crm_link": f"{self.base_url}/card/{number}",
        }

    def cards(self) -> str:
        with self.lock:  # the card with the newest event first
            latest = [(n, events[0], len(events)) for n, events in reversed(self.seen.items())]
        rows = "".join(
            f'<li><a href="/card/{html.escape(number)}">Visitor #{html.escape(number)}</a>: '
            f"{count} event(s), the last <strong>{html.escape(str(last.get('event_name')))}"
            "</strong></li>"
            for number, last, count in latest
        )
        return (
            "<!doctype html><meta charset=utf-8><title>CRM cards</title>"
            "<h1>CRM cards</h1>"
            f"<ul>{rows or '<li>No cards yet: no webhook has arrived.</li>'}</ul>"
        )

    def card(self, number: str) -> str:
        with self.lock:
            events = list(self.seen.get(number, ()))
        rows = "".join(
            f"<li><strong>{html.escape(str(e.get('event_name')))}</strong> "
            f"chat {html.escape(str(e.get('chat_id', '-')))}"
            f"{' → ' + html.escape(str(e['assign_to'])) if e.get('assign_to') else ''}</li>"
            for e in events
        )
        return (
            "<!doctype html><meta charset=utf-8><title>CRM card</title>"
            f"<h1>CRM card of visitor #{html.escape(number)}</h1>"
            f"<ul>{rows or '<li>No events yet.</li>'}</ul>"
        )


class Handler(BaseHTTPRequestHandler):
    server: CrmServer

    def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            return self._send(400, json.dumps({"result": "a JSON body is required"}))
        body = self.rfile.read(length)
        crm = self.server.crm
        if crm.signing_secret and not signature_valid(crm.signing_secret, self.headers, body):
            return self._send(401, json.dumps({"result": "the signature does not verify"}))
        try:
            event = json.loads(body)
        except ValueError:
            return self._send(400, json.dumps({"result": "not JSON"}))
        if not isinstance(event, dict):
            return self._send(400, json.dumps({"result": "not a JSON object"}))
        return self._send(200, json.dumps(crm.take(event)))

    def do_GET(self) -> None:
        if self.path == "/":  # what a newcomer opens first
            return self._send(200, self.server.crm.cards(), "text/html")
        if self.path.startswith("/card/"):
            return self._send(200, self.server.crm.card(self.path[6:]), "text/html")
        return self._send(404, json.dumps({"result": "not found"}))

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per event is logged by Crm.take


class CrmServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], crm: Crm) -> None:
        super().__init__(address, Handler)
        self.crm = crm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An example CRM for Switchboard's webhooks.")
    parser.add_argument("--host", default=os.environ.get("CRM_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("CRM_PORT", "8020")))
    parser.add_argument("--signing-secret", default=os.environ.get("CRM_SIGNING_SECRET", ""))
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server = CrmServer((options.host, options.port), Crm("", options.signing_secret))
    server.crm.base_url = f"http://{options.host}:{server.server_port}"
    logger.info("crm.listening address=%s/", server.crm.base_url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
