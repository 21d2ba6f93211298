import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import audit, services
from agents.management import channel_of, client_of


class Command(BaseCommand):
    help = (
        "Erase one client's data (docs/privacy.md): details, message texts and payloads, "
        "files, offline messages, calls' numbers; the chats stay as anonymous rows. "
        "Cannot be undone, so it needs --yes. "
        'Print {"client", "chats", "messages", "files"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument(
            "--client", required=True, help="the sender id (Chat API) or visitor number (widget)"
        )
        parser.add_argument(
            "--yes", action="store_true", help="erase for good (without it nothing is changed)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = client_of(channel_of(options["channel"]), options["client"])
        if not options["yes"]:
            raise CommandError("an erasure cannot be undone: run again with --yes to erase")
        try:
            erased = services.erase_client(client=client, by=audit.COMMAND_LINE)
        except services.ServiceError as error:
            raise CommandError(error.message) from error
        self.stdout.write(json.dumps(erased))
