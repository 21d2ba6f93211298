import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.audit import COMMAND_LINE
from agents.models import Channel
from bots.services import detach_bot


class Command(BaseCommand):
    help = 'Take the bot off a channel (its chats stay as they are); print {"ok": true}.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")

    def handle(self, *args: Any, **options: Any) -> None:
        channel = Channel.objects.filter(public_id=options["channel"]).first()
        if channel is None:
            raise CommandError(f"no channel with public id {options['channel']!r}")
        if not detach_bot(channel=channel, by=COMMAND_LINE):
            raise CommandError(f"the channel {channel.public_id} has no bot")
        self.stdout.write(json.dumps({"ok": True}))
