import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agents.demo import seed, write_private


class Command(BaseCommand):
    help = "Create demo data (admin, two agents, a channel of each kind); print it as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--output",
            type=Path,
            metavar="PATH",
            help="also write the JSON to PATH, readable by its owner only (it holds logins)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        demo = json.dumps(seed(), indent=2)
        if options["output"]:
            write_private(options["output"], demo + "\n")
        self.stdout.write(demo)
