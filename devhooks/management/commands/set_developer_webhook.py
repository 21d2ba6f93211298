"""``manage.py set_developer_webhook``: the command lives in the webhooks half."""

from devhooks.webhooks.command import Command

__all__ = ["Command"]
