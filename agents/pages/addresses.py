"""The page a confirmation link opens: the visitor confirms the address they
typed, so that transcripts may go to it (docs/transcripts.md).

The link only shows the question; the button (a POST, with CSRF) confirms,
so a mail scanner that fetches links confirms nothing.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from agents import addresses


@require_http_methods(["GET", "HEAD", "POST"])
def confirm(request: HttpRequest, token: str) -> HttpResponse:
    try:
        if request.method == "POST":
            row = addresses.confirm_address(token=token)
        else:
            row = addresses.address_for_token(token)
    except addresses.ConfirmationError as error:
        return render(request, "agents/confirm_address.html", {"error": str(error)}, status=404)
    context = {
        "address": row.address,
        "channel": row.client.channel.name,
        "confirmed": row.trusted,
    }
    return render(request, "agents/confirm_address.html", context)
