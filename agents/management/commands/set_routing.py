import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import services
from agents.management import channel_of
from agents.models import Channel


class Command(BaseCommand):
    help = (
        "Set a channel's routing (docs/routing.md): manual (the shared queue) or offer "
        '(one agent at a time); print {"channel", "mode", "offer_seconds"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument("--mode", required=True, choices=Channel.RoutingMode.values)
        parser.add_argument(
            "--offer-seconds", type=int, help="how long an agent has to take an offer (5-600)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        channel = channel_of(options["channel"])
        try:
            channel = services.set_routing(
                channel=channel, mode=options["mode"], offer_seconds=options["offer_seconds"]
            )
        except services.ServiceError as error:
            raise CommandError(error.message) from error
        self.stdout.write(
            json.dumps(
                {
                    "channel": channel.public_id,
                    "mode": channel.routing_mode,
                    "offer_seconds": channel.offer_seconds,
                }
            )
        )
