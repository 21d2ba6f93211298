"""Demo data for ``seed_demo``: the developer webhooks pointed at the example
CRM (docs/examples/crm_receiver.py) that ``make run`` starts at
``EXAMPLE_CRM_URL`` (by default http://127.0.0.1:8020).

Settings an admin made are left alone: the example CRM is set only when no
webhook URL is set, or when it is the example's own.
"""

from __future__ import annotations

import os
from typing import Any

from agents.models import Agent
from devhooks.models import IntegrationSettings
from devhooks.webhooks.services import DevhookError, set_developer_webhook

DEFAULT_URL = "http://127.0.0.1:8020"


def example_crm_url() -> str:
    return os.environ.get("EXAMPLE_CRM_URL", "").strip() or DEFAULT_URL


def seed_demo_crm(agents: list[Agent]) -> list[dict[str, Any]]:
    url = f"{example_crm_url().rstrip('/')}/"
    current = IntegrationSettings.load()
    entry: dict[str, Any] = {"kind": "crm", "name": "Example CRM", "webhook_url": url}
    if current.endpoint is not None and current.url != url:
        return [{**entry, "skipped": f"the developer webhook is set to {current.url} already"}]
    try:
        _config, secret = set_developer_webhook(url=url)
    except DevhookError as error:
        return [{**entry, "skipped": f"{url}: {error.message}"}]
    shown = secret or "(shown when first set; rotate it in the admin)"
    return [{**entry, "signing_secret": shown}]
