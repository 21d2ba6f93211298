"""Demo data for ``seed_demo``: a website widget embedded by the example site
(docs/examples/widget_host.py) that ``make run`` starts at
``EXAMPLE_WIDGET_HOST_URL`` (by default http://127.0.0.1:8030/). The demo
widget is made once and kept as it is afterwards.
"""

from __future__ import annotations

import os
from typing import Any

from agents.models import Agent
from devhooks.models import WidgetChannel
from devhooks.widget.services import create_widget_channel

DEFAULT_WIDGET_HOST_URL = "http://127.0.0.1:8030/"
WIDGET_NAME = "Demo website"
WIDGET_RULES = {
    "invitations": [
        {
            "text": "Need a hand with your order?",
            "after_seconds": 20,
            "url_contains": "",
            "department_id": None,
        }
    ]
}


def example_widget_host_url() -> str:
    return os.environ.get("EXAMPLE_WIDGET_HOST_URL", "").strip() or DEFAULT_WIDGET_HOST_URL


def seed_demo_widget(agents: list[Agent]) -> list[dict[str, Any]]:
    """The "Demo website" widget with the demo agents, callback requests, the
    offline form and one proactive invitation; made once, reused afterwards."""
    widget = (
        WidgetChannel.objects.select_related("channel")
        .filter(channel__name=WIDGET_NAME)
        .order_by("pk")
        .first()
    )
    if widget is None:
        widget = create_widget_channel(
            name=WIDGET_NAME,
            agent_emails=[agent.email for agent in agents],
            callback=True,
            title="Questions? Chat with us",
        )
        widget.offline_form = True
        widget.rules = WIDGET_RULES
        widget.save(update_fields=["offline_form", "rules"])
    return [
        {
            "kind": "widget",
            "name": WIDGET_NAME,
            "widget_id": widget.widget_id,
            "script_url": widget.script_url,
            "embed_code": widget.embed_code,
            "host_page": example_widget_host_url(),
        }
    ]
