import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import audit
from devhooks.models import WidgetChannel
from devhooks.widget.languages import DEFAULT_LANGUAGE, WIDGET_LANGUAGES
from devhooks.widget.services import WidgetError, create_widget_channel


class Command(BaseCommand):
    help = (
        'Create a website widget channel; print {"id", "widget_id", "script_url", '
        '"embed_code"}. The embed code goes on every page of the site.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--agent", action="append", default=[], metavar="EMAIL", help="assign an agent"
        )
        parser.add_argument(
            "--callback",
            action="store_true",
            help="take callback requests (every day, all day; the admin narrows the hours)",
        )
        parser.add_argument("--title", default="", help='the widget\'s header ("Chat with us")')
        parser.add_argument(
            "--waiting-text",
            default="",
            help='shown after the visitor\'s first message ("An agent will answer shortly.")',
        )
        parser.add_argument(
            "--language",
            default=DEFAULT_LANGUAGE,
            choices=list(WIDGET_LANGUAGES),
            help="the widget's language where the page's <html lang> names none it speaks",
        )
        parser.add_argument(
            "--prechat",
            action="append",
            default=[],
            metavar="FIELD=ASK",
            help="ask before the first message: name, email or phone = optional or required",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        title_limit = WidgetChannel._meta.get_field("title").max_length or 0
        if len(options["title"].strip()) > title_limit:
            raise CommandError(f"the title is at most {title_limit} characters")
        try:
            widget = create_widget_channel(
                name=options["name"],
                agent_emails=options["agent"],
                callback=options["callback"],
                title=options["title"],
                waiting_text=options["waiting_text"],
                language=options["language"],
                prechat=dict(item.partition("=")[::2] for item in options["prechat"]),
                by=audit.COMMAND_LINE,
            )
        except WidgetError as error:
            raise CommandError(error.message) from error
        self.stdout.write(
            json.dumps(
                {
                    "id": widget.channel_id,
                    "widget_id": widget.widget_id,
                    "script_url": widget.script_url,
                    "embed_code": widget.embed_code,
                }
            )
        )
