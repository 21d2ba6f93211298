import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import reportdata
from agents.models import Chat


class Command(BaseCommand):
    help = (
        'Make a history of chats to measure the reports on (docs/reports.md, "Speed"): '
        "--chats over the last --days, on four channels with 30 agents; print what it made "
        "as JSON. Test data: refused where DEBUG is off or chats exist, unless --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chats", type=int, default=100_000)
        parser.add_argument("--days", type=int, default=90)
        parser.add_argument(
            "--seed", type=int, default=0, help="the same seed, the same history (ending now)"
        )
        parser.add_argument(
            "--yes", action="store_true", help="add to a database with chats, or with DEBUG off"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["chats"] < 1 or options["days"] < 1:
            raise CommandError("--chats and --days are 1 or more")
        if not options["yes"]:
            if not settings.DEBUG:
                raise CommandError(
                    "DEBUG is off (production?): this makes test data; --yes to go on"
                )
            if Chat.objects.exists():
                raise CommandError("the database holds chats already; --yes to add to them")
        made = reportdata.seed(chats=options["chats"], days=options["days"], seed=options["seed"])
        self.stdout.write(json.dumps(made, indent=2))
