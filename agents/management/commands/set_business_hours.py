import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import hours, services
from agents.management import channel_of


class Command(BaseCommand):
    help = (
        "Set a channel's business hours (docs/routing.md): outside them the channel "
        "is unavailable whoever is online. Prints the channel's hours as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="the channel's public id")
        parser.add_argument("--time-zone", help="an IANA time zone, e.g. Europe/Berlin")
        parser.add_argument(
            "--hours",
            action="append",
            help='days and hours, e.g. "mon-fri 09:00-18:00" (repeat for more)',
        )
        parser.add_argument(
            "--closed", action="append", help="a date closed, YYYY-MM-DD (repeat for more)"
        )
        parser.add_argument("--always", action="store_true", help="remove the hours: always open")
        parser.add_argument(
            "--away-message",
            help="sent once per chat to a client writing while nobody can answer ('' removes it)",
        )
        parser.add_argument(
            "--standard-away-message",
            action="store_true",
            help=f'the away message is "{hours.STANDARD_AWAY_MESSAGE}", in the chat\'s language',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        channel = channel_of(options["channel"])
        try:
            channel = services.set_business_hours(
                channel=channel,
                time_zone=options["time_zone"],
                weekly=options["hours"],
                closed=options["closed"],
                always=options["always"],
                away_message=(
                    hours.STANDARD_AWAY_MESSAGE
                    if options["standard_away_message"]
                    else options["away_message"]
                ),
            )
        except services.ServiceError as error:
            raise CommandError(error.message) from error
        self.stdout.write(json.dumps(hours.describe(channel)))
