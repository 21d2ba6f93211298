import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import audit
from channels_api.models import ChatApiChannel
from channels_api.services import rotate_path_secret


class Command(BaseCommand):
    help = (
        "Give a Chat API channel a new secret in its URLs (the old ones stop working at once); "
        'print {"id", "public_id", "endpoint_url", "status_url"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, metavar="PUBLIC_ID")

    def handle(self, *args: Any, **options: Any) -> None:
        chat_api = (
            ChatApiChannel.objects.select_related("channel")
            .filter(channel__public_id=options["channel"])
            .first()
        )
        if chat_api is None:
            raise CommandError(f"no Chat API channel with public id {options['channel']!r}")
        rotated = rotate_path_secret(chat_api=chat_api, by=audit.COMMAND_LINE)
        self.stdout.write(
            json.dumps(
                {
                    "id": rotated.channel_id,
                    "public_id": rotated.channel.public_id,
                    "endpoint_url": rotated.endpoint_url,
                    "status_url": rotated.status_url,
                }
            )
        )
