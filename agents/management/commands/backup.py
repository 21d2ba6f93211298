from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.backup import BackupError, backup


class Command(BaseCommand):
    help = (
        "Back up the database and the stored files into a new folder while the "
        "service runs (docs/operations.md, 'Backups')."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="a new or empty folder")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = backup(options["folder"])
        except BackupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"backed up {done.rows} rows in {len(done.counts)} tables and "
            f"{done.files} files to {done.folder}"
        )
