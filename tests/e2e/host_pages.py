"""A site owner's web server for the widget's browser tests: pages on an
origin other than the service's, each with the headers a test gives it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HostSite:
    """Serves ``pages``: path → (content type, body, extra headers)."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, str, dict[str, str]]] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = site.pages.get(self.path.split("?")[0])
                if found is None:
                    self.send_error(404)
                    return
                content_type, body, headers = found
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def page(self, path: str, body: str, **headers: str) -> str:
        self.pages[path] = ("text/html; charset=utf-8", body, headers)
        return self.url + path

    def script(self, path: str, body: str) -> str:
        self.pages[path] = ("text/javascript", body, {})
        return self.url + path


@contextmanager
def host_site() -> Iterator[HostSite]:
    site = HostSite()
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()
