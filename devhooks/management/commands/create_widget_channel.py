"""``manage.py create_widget_channel``: the command lives in the widget half."""

from devhooks.widget.command import Command

__all__ = ["Command"]
