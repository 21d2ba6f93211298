from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.backup import BackupError, restore


class Command(BaseCommand):
    help = (
        "Restore a backup folder into this installation's new, empty database and "
        "its files, check every table's count, then migrate (docs/operations.md, 'Backups')."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="a folder `manage.py backup` wrote")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = restore(options["folder"])
        except BackupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"restored {done.rows} rows in {len(done.counts)} tables and "
            f"{done.files} files from {done.folder}"
        )
