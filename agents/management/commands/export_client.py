import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agents import audit, privacy
from agents.management import channel_of, client_of


class Command(BaseCommand):
    help = (
        "Print everything held about one client as JSON (docs/privacy.md): contact "
        "details, chats with messages, ratings, files as links, offline messages, calls."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument(
            "--client", required=True, help="the sender id (Chat API) or visitor number (widget)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = client_of(channel_of(options["channel"]), options["client"])
        held = privacy.export_client(client, by=audit.COMMAND_LINE)
        self.stdout.write(json.dumps(held, ensure_ascii=False))
