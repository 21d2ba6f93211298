import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import services


class Command(BaseCommand):
    help = (
        'Add a label to the list agents label chats from; print {"id", "name", "colour"}. '
        "A name on the list already (in any case) is refused: the admin changes a label."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="up to 50 characters, e.g. billing")
        parser.add_argument(
            "--colour", default="", help="#rrggbb, shown on the label's chip (default #1f77b4)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            label = services.create_label(name=options["name"], colour=options["colour"])
        except services.ServiceError as error:
            raise CommandError(error.message) from error
        self.stdout.write(json.dumps({"id": label.pk, "name": label.name, "colour": label.colour}))
