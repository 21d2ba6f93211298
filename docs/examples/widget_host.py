"""An example site embedding Switchboard's website widget (docs/widget.md).

Standard library only; Python 3.11+. It serves, from an origin of its own:

- ``GET /``: a page with the widget's one ``<script>`` tag, a button for
  every ``svc_api`` function (with fixed sample arguments) and a log where
  each call's return value and each ``svc_on…`` callback the widget makes
  is written;
- ``GET /host.js``: the page's own script (docs/examples/widget_host.js),
  a file, as a strict Content-Security-Policy wants it;
- ``GET /host.css``: the page's styles.

Every answer carries a Content-Security-Policy without ``'unsafe-inline'``
that allows scripts from this origin and the service's, and requests to the
service's only: the widget must work under it.

Run it (``make run`` starts it with the demo widget's id)::

    python docs/examples/widget_host.py --port 8030 \\
        --service-url http://127.0.0.1:8000 --widget-id <widget id>

Each option may be given as an environment variable instead: WIDGET_HOST_HOST,
WIDGET_HOST_PORT, PUBLIC_URL (the service) and WIDGET_ID.
"""

from __future__ import annotations

import argparse
import html
import logging
import os
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("widget_host")

SCRIPT = Path(__file__).with_name("widget_host.js")
WIDGET_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
# What would end the script tag's attribute (or the CSP's source list) early.
UNSAFE_IN_URL = re.compile(r"[\s\"'<>\\;,]")

# (label, the call host.js makes): the buttons, in the order of docs/widget.md.
CALLS = (
    ("open", "open()"),
    ("openCall", "open({start: 'call'})"),
    ("close", "close()"),
    ("chatMode", "chatMode()"),
    ("getContactInfo", "getContactInfo()"),
    ("getVisitorNumber", "getVisitorNumber(callback)"),
    ("setContactInfo", "setContactInfo({name, email, phone, description})"),
    ("setCustomData", "setCustomData([order A-1001])"),
    ("setRules", "setRules({invitations: [after 5 s]})"),
    ("setUserToken", "setUserToken('crm-user-1001')"),
    ("showProactiveInvitation", "showProactiveInvitation('Can I help you?')"),
    ("startCall", "startCall('+49 30 1234567')"),
    ("isCallbackEnabled", "isCallbackEnabled(callback)"),
    ("sendOfflineMessage", "sendOfflineMessage({…, message})"),
    ("sendPageTitle", "sendPageTitle('Checkout')"),
    ("getUnreadMessagesCount", "getUnreadMessagesCount()"),
    ("getUtm", "getUtm()"),
    ("clearHistory", "clearHistory()"),
    ("setWidgetColor", "setWidgetColor('#0a7d3b', '#ffffff')"),
    ("setLocale", "setLocale('de')"),
    ("svc_destroy", "svc_destroy()"),
    ("svc_init", "svc_init()"),
)

STYLES = """\
/* Left-aligned and narrow enough to leave the widget's corner free on a laptop. */
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; max-width: 52rem; padding: 1rem 2rem; }
/* The embed code is one long word: it breaks, or a phone's page would be wider than its screen. */
code { background: #f0f0f0; padding: 0 .2em; overflow-wrap: anywhere; }
#log li { overflow-wrap: anywhere; }
@media (max-width: 480px) { body { padding: .5rem 1rem; } }
.calls { display: flex; flex-wrap: wrap; gap: .4rem; }
.calls button { font: 14px ui-monospace, monospace; padding: .3rem .5rem; }
#log { font: 13px/1.4 ui-monospace, monospace; background: #fafafa; border: 1px solid #ddd;
       max-height: 24rem; overflow: auto; padding: .5rem .5rem .5rem 2.5rem; }
#log .callback { color: #1f4fa0; }
#log .error { color: #b00020; }
"""

PAGE = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Example shop: the Switchboard widget</title>
<link rel="stylesheet" href="/host.css">
</head>
<body>
<main>
<h1>Example shop</h1>
<p>This page is served from an origin other than Switchboard's, under a strict
Content-Security-Policy (no <code>'unsafe-inline'</code>). It embeds the widget
<code>{widget_id}</code> of <code>{service_url}</code> with one tag:</p>
<p><code>{embed_code}</code></p>
<h2>svc_api</h2>
<p>Each button calls one function with a fixed sample value; what it returns
is written to the log below, and so is every callback the widget makes.</p>
<div class="calls">
{buttons}
</div>
<h2>Log</h2>
<p><button type="button" id="clear-log">Clear the log</button></p>
<ol id="log" aria-live="polite"></ol>
</main>
<script src="/host.js"></script>
{embed_code_raw}
</body>
</html>
"""


class Site:
    """What the example serves: the page for one widget of one service."""

    def __init__(self, service_url: str, widget_id: str) -> None:
        parts = urlsplit(service_url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or UNSAFE_IN_URL.search(service_url)
        ):
            raise ValueError(f"--service-url must be an http(s) URL, not {service_url!r}")
        if not WIDGET_ID.fullmatch(widget_id):
            raise ValueError(f"--widget-id is 1 to 32 of A-Z a-z 0-9 _ -, not {widget_id!r}")
        self.service_url = service_url.rstrip("/")
        self.service_origin = f"{parts.scheme}://{parts.netloc}"
        self.widget_id = widget_id

    @property
    def embed_code(self) -> str:
        return f'<script src="{self.service_url}/widget/{self.widget_id}.js" async></script>'

    @property
    def content_security_policy(self) -> str:
        origin = self.service_origin
        return (
            f"default-src 'self'; script-src 'self' {origin}; connect-src {origin}; "
            "style-src 'self'; img-src 'self' data:"
        )

    def page(self) -> str:
        buttons = "\n".join(
            f'<button type="button" data-call="{name}">{html.escape(label)}</button>'
            for name, label in CALLS
        )
        return PAGE.format(
            widget_id=html.escape(self.widget_id),
            service_url=html.escape(self.service_url),
            embed_code=html.escape(self.embed_code),
            embed_code_raw=self.embed_code,  # both parts checked in __init__
            buttons=buttons,
        )


class Handler(BaseHTTPRequestHandler):
    server: SiteServer

    def _send(self, status: int, body: bytes, content_type: str, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", self.server.site.content_security_policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self, head: bool = False) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/":
            return self._send(200, self.server.site.page().encode(), "text/html", head=head)
        if path == "/host.js":
            return self._send(200, SCRIPT.read_bytes(), "text/javascript", head=head)
        if path == "/host.css":
            return self._send(200, STYLES.encode(), "text/css", head=head)
        if path == "/favicon.ico":  # none, and no 404 in the browser's console for it
            return self._send(204, b"", "image/x-icon", head=head)
        return self._send(404, b"not found", "text/plain", head=head)

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("widget_host.request %s", format % args)


class SiteServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], site: Site) -> None:
        super().__init__(address, Handler)
        self.site = site


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An example site with Switchboard's widget.")
    parser.add_argument("--host", default=os.environ.get("WIDGET_HOST_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("WIDGET_HOST_PORT", "8030")))
    parser.add_argument(
        "--service-url",
        default=os.environ.get("PUBLIC_URL", "http://127.0.0.1:8000"),
        help="Switchboard's PUBLIC_URL",
    )
    parser.add_argument(
        "--widget-id", default=os.environ.get("WIDGET_ID", ""), help="the widget's id"
    )
    options = parser.parse_args(argv)
    try:
        site = Site(options.service_url, options.widget_id)
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server = SiteServer((options.host, options.port), site)
    logger.info(
        "widget_host.listening address=http://%s:%s/ service=%s widget_id=%s",
        options.host,
        server.server_port,
        site.service_url,
        site.widget_id,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
