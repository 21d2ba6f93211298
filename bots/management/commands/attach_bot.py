import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.audit import COMMAND_LINE
from agents.models import Channel
from bots.models import BotProvider
from bots.services import BotError, attach_bot


class Command(BaseCommand):
    help = (
        "Attach a bot provider to a channel with the token the provider generated; print "
        '{"ok": true}. The signing secret of its B1 requests goes to stderr, once.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument("--provider", required=True, help="the provider_id")
        parser.add_argument("--token", required=True, help="the token the provider generated")

    def handle(self, *args: Any, **options: Any) -> None:
        channel = Channel.objects.filter(public_id=options["channel"]).first()
        if channel is None:
            raise CommandError(f"no channel with public id {options['channel']!r}")
        provider = BotProvider.objects.filter(provider_id=options["provider"]).first()
        if provider is None:
            raise CommandError(f"no bot provider with provider_id {options['provider']!r}")
        try:
            _attachment, secret = attach_bot(
                channel=channel, provider=provider, token=options["token"], by=COMMAND_LINE
            )
        except BotError as error:
            raise CommandError(error.message) from error
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from error
        self.stderr.write(f"signing secret of the B1 requests (shown once): {secret}")
        self.stdout.write(json.dumps({"ok": True}))
