"""The WSGI entry point, for tools that want one (``manage.py runserver``).

The service itself is served over ASGI: config/asgi.py, config/gunicorn.py.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
