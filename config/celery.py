"""The Celery application: tasks live in each app's ``tasks.py``."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from config.log_redaction import RedactSecrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_path_secrets(logger: logging.Logger, **kwargs: Any) -> None:
    """Celery sets up handlers of its own: they redact path secrets too
    (config/log_redaction.py), as the web process's do."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
