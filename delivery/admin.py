"""The delivery log with redelivery, and endpoints with their secrets and failures."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from secrets import token_urlsafe
from typing import Any
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timezone import localtime

from delivery import services
from delivery.models import Delivery, DeliveryAttempt, Endpoint

_NEW_SECRET = "_delivery_new_secret"  # noqa: S105 (a request attribute name)
# The delivery log's list shows the start of a last error, its tooltip more.
_ERROR_LIST_CHARS = 100
_ERROR_TITLE_CHARS = 1000


def _pretty(value: Any) -> str:
    return format_html(
        '<pre class="pretty">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False)
    )


@dataclass(frozen=True)
class NewSecret:
    """A signing secret to show once, beside the admin page of what it signs for."""

    owner: str
    owner_url: str
    secret: str


_SESSION_KEY = "new-secrets:{}"


SIGNING_SECRET = "signing secret"  # noqa: S105 (what a secret page shows, by name)
ENDPOINT_URL = "endpoint URL"  # a Chat API channel's, whose path holds its secret


def secret_page(
    request: HttpRequest,
    secrets: list[NewSecret],
    *,
    onward: tuple[str, str],
    kind: str = SIGNING_SECRET,
) -> HttpResponseRedirect:
    """Answer the POST that made ``secrets`` with a redirect to the one page
    that shows them, once (Post/Redirect/Get: reloading that page cannot make
    or rotate a secret again).

    Until shown they wait in the server-side session (the database; the
    cookie holds only its key), never in a message (a cookie). ``onward`` is
    the link to go on with: (text, URL); ``kind`` what the secrets are
    (``SIGNING_SECRET`` or ``ENDPOINT_URL``).
    """
    token = token_urlsafe(16)
    request.session[_SESSION_KEY.format(token)] = {
        "secrets": [asdict(new) for new in secrets],
        "onward": list(onward),
        "kind": kind,
    }
    response = HttpResponseRedirect(reverse("admin:delivery_new_secret", args=[token]))
    response.status_code = 303  # See Other: the page is fetched with GET
    return response


def new_secret_view(request: HttpRequest, admin_site: admin.AdminSite, token: str) -> HttpResponse:
    """The only place a signing secret is ever shown, once: it leaves the
    session as it is shown, and no cache keeps the page."""
    shown = request.session.pop(_SESSION_KEY.format(token), None)
    kind = shown.get("kind", SIGNING_SECRET) if shown else SIGNING_SECRET
    context = {**admin_site.each_context(request), "title": kind.capitalize(), "kind": kind}
    if shown is None:
        context["onward_text"], context["onward_url"] = _to_endpoints()
        response = TemplateResponse(request, "admin/delivery/secret_gone.html", context, status=410)
    else:
        context["secrets"] = [NewSecret(**new) for new in shown["secrets"]]
        context["onward_text"], context["onward_url"] = shown["onward"]
        response = TemplateResponse(request, "admin/delivery/secret.html", context)
    response["Cache-Control"] = "no-store"
    return response


def _endpoint_secrets(pairs: list[tuple[Endpoint, str]]) -> list[NewSecret]:
    return [
        NewSecret(endpoint.url, reverse("admin:delivery_endpoint_change", args=[endpoint.pk]), key)
        for endpoint, key in pairs
    ]


def _to_endpoints() -> tuple[str, str]:
    return "Back to the endpoints", reverse("admin:delivery_endpoint_changelist")


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin[Endpoint]):
    list_display = [
        "url",
        "active",
        "chunked",
        "consecutive_failures",
        "disabled_reason",
        "created",
    ]
    list_filter = ["active", "chunked"]
    search_fields = ["url"]
    fields = [
        "url",
        "chunked",
        "active",
        "consecutive_failures",
        "disabled_reason",
        "secret_state",
        "created",
    ]
    readonly_fields = ["consecutive_failures", "disabled_reason", "secret_state", "created"]
    actions = ["rotate_secret", "switch_on"]

    @admin.display(description="signing secret")
    def secret_state(self, endpoint: Endpoint) -> str:
        if not endpoint.pk:
            return "shown once, after saving"
        if endpoint.previous_secret_expires and endpoint.previous_secret:
            return (
                "set (hidden); rotated: the previous secret also signs until "
                f"{endpoint.previous_secret_expires:%Y-%m-%d %H:%M} UTC"
            )
        return "set (hidden); use the action “Rotate signing secret” for a new one"

    def save_model(
        self, request: HttpRequest, obj: Endpoint, form: ModelForm[Endpoint], change: bool
    ) -> None:
        if change:
            services.update_endpoint(
                endpoint=obj, url=obj.url, chunked=obj.chunked, active=obj.active
            )
            return
        endpoint, secret = services.create_endpoint(url=obj.url, chunked=obj.chunked)
        if not obj.active:
            services.update_endpoint(endpoint=endpoint, active=False)
        obj.pk = endpoint.pk
        obj.refresh_from_db()
        setattr(request, _NEW_SECRET, secret)

    def response_add(
        self, request: HttpRequest, obj: Endpoint, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(request, _NEW_SECRET, None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        return secret_page(request, _endpoint_secrets([(obj, secret)]), onward=_to_endpoints())

    @admin.action(description="Rotate signing secret (the old one signs on for a grace period)")
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponseRedirect:
        rotated = [(endpoint, services.rotate_secret(endpoint=endpoint)) for endpoint in queryset]
        return secret_page(request, _endpoint_secrets(rotated), onward=_to_endpoints())

    def get_urls(self) -> list[URLPattern]:
        show = self.admin_site.admin_view(
            lambda request, token: new_secret_view(request, self.admin_site, token)
        )
        return [
            path("new-secret/<str:token>/", show, name="delivery_new_secret"),
            *super().get_urls(),
        ]

    @admin.action(description="Switch on (and clear the failure count)")
    def switch_on(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for endpoint in queryset:
            services.update_endpoint(endpoint=endpoint, active=True)
        self.message_user(request, f"{queryset.count()} endpoint(s) switched on.")


class DeliveryAttemptInline(admin.TabularInline[DeliveryAttempt, Delivery]):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "number",
        "started_at",
        "duration_ms",
        "status_code",
        "error",
        "excerpt",
        "headers_sent",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="response excerpt")
    def excerpt(self, attempt: DeliveryAttempt) -> str:
        return format_html('<pre class="pretty excerpt">{}</pre>', attempt.response_excerpt)

    @admin.display(description="headers sent")
    def headers_sent(self, attempt: DeliveryAttempt) -> str:
        return _pretty(attempt.request_headers)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    """The delivery log: read-only rows (what was sent, every try and its
    answer); a failed or dropped one can be redelivered from the list."""

    # What a person looks for first: how it went, how often it was tried, why.
    # Every column but the last error is short, so the list fits a 1366 px
    # screen without sideways scrolling (static/admin/switchboard.css).
    list_display = [
        "status",
        "tries",
        "last_error_short",
        "event_subject",
        "endpoint_host",
        "created_short",
    ]
    list_display_links = ["status"]
    list_filter = ["status", "purpose", "event", "policy", "endpoint"]
    search_fields = ["subject", "webhook_id", "ordering_key"]
    date_hierarchy = "created"
    list_select_related = ["endpoint"]
    fields = readonly_fields = (
        "endpoint",
        "purpose",
        "event",
        "subject",
        "policy",
        "ordering_key",
        "webhook_id",
        "status",
        "attempts",
        "next_attempt_at",
        "expires_at",
        "last_error",
        "created",
        "completed_at",
        "body_sent",
        "reply",
    )
    inlines = [DeliveryAttemptInline]
    actions = ["redeliver"]

    class Media:
        css = {"all": ["admin/switchboard.css"]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": "Delivery log", **(extra_context or {})})

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        # The list's Redeliver action needs "change"; a row itself is read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delivery]:
        return super().get_queryset(request).annotate(logged_tries=Count("attempt_log"))

    @admin.display(description="tries", ordering="logged_tries")
    def tries(self, delivery: Delivery) -> int:
        """Every try logged, across redeliveries (``attempts`` restarts at each)."""
        logged = getattr(delivery, "logged_tries", None)  # annotated by get_queryset
        return int(logged if logged is not None else delivery.attempt_log.count())

    @admin.display(description="last error")
    def last_error_short(self, delivery: Delivery) -> str:
        """The start of the error; all of it on hover (up to a limit) and on the row's page."""
        if not delivery.last_error:
            return ""
        return format_html(
            '<span title="{}">{}</span>',
            Truncator(delivery.last_error).chars(_ERROR_TITLE_CHARS),
            Truncator(delivery.last_error).chars(_ERROR_LIST_CHARS),
        )

    @admin.display(description="event", ordering="event")
    def event_subject(self, delivery: Delivery) -> str:
        """The event, and under it what it is about (``chat:12``, ``message:34``)."""
        return format_html(
            '<span class="event">{}</span><span class="subject">{}</span>',
            delivery.event,
            delivery.subject,
        )

    @admin.display(description="endpoint", ordering="endpoint__url")
    def endpoint_host(self, delivery: Delivery) -> str:
        return format_html(
            '<span title="{}">{}</span>',
            delivery.endpoint.url,
            urlsplit(delivery.endpoint.url).netloc,
        )

    @admin.display(description="created", ordering="created")
    def created_short(self, delivery: Delivery) -> str:
        return f"{localtime(delivery.created):%Y-%m-%d %H:%M}"

    @admin.display(description="body sent")
    def body_sent(self, delivery: Delivery) -> str:
        return _pretty(delivery.payload)

    @admin.display(description="reply body")
    def reply(self, delivery: Delivery) -> str:
        return _pretty(delivery.reply_body)

    @admin.action(description="Redeliver (failed or dropped deliveries)", permissions=["change"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        sent, refused = 0, 0
        for delivery in queryset:
            try:
                services.redeliver(delivery=delivery)
            except services.DeliveryError:
                refused += 1
            else:
                sent += 1
        if sent:
            self.message_user(request, f"{sent} delivery(ies) queued again.", messages.SUCCESS)
        if refused:
            self.message_user(
                request,
                f"{refused} skipped: only failed or dropped deliveries are redelivered.",
                messages.WARNING,
            )
