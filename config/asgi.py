"""The web application: Django, each request's body due within HTTP_BODY_TIMEOUT_SECONDS.

Served by gunicorn with uvicorn workers (config/gunicorn.py, config/web_server.py):

    gunicorn -c config/gunicorn.py config.asgi:application
"""

import os
import warnings

import environ
from django.core.asgi import get_asgi_application

from config.body_timeout import BodyTimeout

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
application = BodyTimeout(
    get_asgi_application(),
    seconds=environ.Env().float("HTTP_BODY_TIMEOUT_SECONDS", default=30.0),
)
