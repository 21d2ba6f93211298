import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import services
from agents.management import channel_of
from agents.models import Channel


def minutes_or_off(value: str) -> int:
    """``--idle-close-minutes``: a whole number of minutes, ``0`` or ``off``."""
    if value.strip().lower() == "off":
        return 0
    try:
        return int(value)
    except ValueError:
        raise CommandError(f"--idle-close-minutes takes minutes or off, not {value!r}") from None


class Command(BaseCommand):
    help = (
        "Set a channel's routing (docs/routing.md): manual (the shared queue) or offer "
        "(one agent at a time), and idle close; each option given replaces what it names. "
        'Print {"channel", "mode", "offer_seconds", "idle_close_minutes", "idle_warning"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument("--mode", choices=Channel.RoutingMode.values)
        parser.add_argument(
            "--offer-seconds", type=int, help="how long an agent has to take an offer (5-600)"
        )
        parser.add_argument(
            "--idle-close-minutes",
            help="finish an active chat the client left unanswered after the agent wrote, "
            "after this many minutes (1-1440); 0 or off: never",
        )
        parser.add_argument(
            "--idle-warning", help="sent to the client just before idle close; '' for none"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        channel = channel_of(options["channel"])
        idle = options["idle_close_minutes"]
        try:
            channel = services.set_routing(
                channel=channel,
                mode=options["mode"],
                offer_seconds=options["offer_seconds"],
                idle_close_minutes=minutes_or_off(idle) if idle is not None else None,
                idle_warning=options["idle_warning"],
            )
        except services.ServiceError as error:
            raise CommandError(error.message) from error
        self.stdout.write(
            json.dumps(
                {
                    "channel": channel.public_id,
                    "mode": channel.routing_mode,
                    "offer_seconds": channel.offer_seconds,
                    "idle_close_minutes": channel.idle_close_minutes,
                    "idle_warning": channel.idle_warning,
                }
            )
        )
