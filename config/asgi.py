"""The web application: Django behind the request limits of config/request_limits.py.

Served by gunicorn with uvicorn workers (config/gunicorn.py, config/web_server.py):

    gunicorn -c config/gunicorn.py config.asgi:application
"""

import os
import warnings

import environ
from django.core.asgi import get_asgi_application

from config.request_limits import RequestLimits

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Each request runs in a thread of its own here: PostgreSQL connections come
# from a pool, not kept per thread (settings.py, "database").
os.environ["DATABASE_POOL"] = "true"
# whitenoise (6.x) hands Django static files as synchronous iterators, which
# Django's ASGI handler reads whole in a thread before sending: correct, and
# cheap for files of this size, so its warning on every first file is noise.
warnings.filterwarnings(
    "ignore", message="StreamingHttpResponse must consume synchronous iterators"
)
django_application = get_asgi_application()


def largest_body(path: str) -> int:
    """The largest request body a path takes: A2's and B2's own limits, an
    agent's file (AGENT_FILE_MAX_BYTES), Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    (2.5 MB) everywhere else."""
    from django.conf import settings

    if path.startswith("/chat-api/"):
        return int(settings.CHAT_API_MAX_BODY_BYTES)
    if path.startswith("/webhooks/"):
        return int(settings.BOT_API_MAX_BODY_BYTES)
    if path.startswith(("/agent/chats/", "/api/agent/v1/chats/")) and path.endswith("/files"):
        return int(settings.AGENT_FILE_MAX_BYTES) + 64 * 1024  # the file and its form

    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440)


application = RequestLimits(
    django_application,
    seconds=environ.Env().float("HTTP_BODY_TIMEOUT_SECONDS", default=30.0),
    max_bytes=largest_body,
)
