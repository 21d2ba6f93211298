"""gunicorn settings of the web process (docs/operations.md, "Serving").

The Procfile, ``make run``, the tests and the benchmark all start it so:

    gunicorn -c config/gunicorn.py config.asgi:application [--bind HOST:PORT]

Any setting here can be overridden per deploy with ``GUNICORN_CMD_ARGS``.
"""

import os

bind = [f"0.0.0.0:{os.environ.get('PORT', '8000')}"]
# One worker per core: each runs an event loop, and Django runs each request's
# view in a thread of its own, so a worker is never stuck behind one request.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# uvicorn under gunicorn: idle and slow clients hold no thread; request headers
# and bodies have time limits (config/web_server.py, config/request_limits.py).
worker_class = "config.web_server.Worker"
# Error and access logs with path secrets redacted (config/log_redaction.py).
logger_class = "config.web_server.GunicornLogger"
accesslog = "-"
errorlog = "-"
# Seconds an idle kept-alive connection stays open between requests.
keepalive = 5
# Seconds a stopping worker waits for its open requests. Live streams never
# end by themselves: they are cut after this, and browsers reconnect (to
# another worker or the restarted one) with Last-Event-ID (docs/live.md).
graceful_timeout = int(os.environ.get("WEB_GRACEFUL_TIMEOUT", "5"))
proc_name = "switchboard-web"
# gunicorn's control socket (for gunicornc) sits at one path per user: several
# web processes on one machine, or a test run beside `make run`, would collide.
control_socket_disable = True
