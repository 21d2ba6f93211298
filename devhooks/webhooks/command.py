import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import audit
from devhooks.models import EVENTS
from devhooks.webhooks.services import DevhookError, set_developer_webhook


class Command(BaseCommand):
    help = (
        "Send the developer webhooks (C1) to a URL; print "
        '{"url", "events", "signing_secret"}. The secret is printed when it is made '
        "(the first time, or with --rotate-secret) and is null otherwise."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", required=True, help="the CRM's webhook URL")
        parser.add_argument(
            "--event",
            action="append",
            default=[],
            choices=EVENTS,
            help="an event to send (repeat it); none given: all events",
        )
        parser.add_argument(
            "--safe-url-domain",
            action="append",
            default=[],
            help="a domain whose links agents may see (repeat it); turns Safe URL on",
        )
        parser.add_argument("--no-safe-url", action="store_true", help="switch Safe URL off")
        parser.add_argument(
            "--rotate-secret", action="store_true", help="make a new signing secret"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config, secret = set_developer_webhook(
                url=options["url"],
                events=options["event"],
                safe_url_domains=options["safe_url_domain"],
                safe_url=False if options["no_safe_url"] else None,
                rotate_secret=options["rotate_secret"],
                by=audit.COMMAND_LINE,
            )
        except DevhookError as error:
            raise CommandError(error.message) from error
        output = {
            "url": config.url,
            "events": config.events or list(EVENTS),
            "signing_secret": secret,
        }
        self.stdout.write(json.dumps(output))
