"""The page a confirmation link opens: the visitor confirms the address they
typed, so that transcripts may go to it (docs/transcripts.md).

The link only shows the question; the button (a POST, with CSRF) confirms,
so a mail scanner that fetches links confirms nothing. The page speaks the
client's chat's language, as the mail did (agents.languages); a link that
names no address, the browser's.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.http import require_http_methods

from agents import addresses, languages

TEMPLATE = "agents/confirm_address.html"


@require_http_methods(["GET", "HEAD", "POST"])
def confirm(request: HttpRequest, token: str) -> HttpResponse:
    try:
        if request.method == "POST":
            row = addresses.confirm_address(token=token)
        else:
            row = addresses.address_for_token(token)
    except addresses.ConfirmationError as error:
        with translation.override(translation.get_language_from_request(request)):
            return render(request, TEMPLATE, {"error": error.reason}, status=404)
    context = {
        "address": row.address,
        "channel": row.client.channel.name,
        "confirmed": row.trusted,
    }
    with translation.override(languages.of_client(row.client)):
        return render(request, TEMPLATE, context)
