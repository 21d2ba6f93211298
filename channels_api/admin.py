"""Admin: "Add Chat API channel" (spec A, channel creation form)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents import audit
from agents.admin import ChannelAgentsField, copyable
from channels_api import services
from channels_api.models import ChatApiChannel
from delivery.admin import ENDPOINT_URL, SIGNING_SECRET, NewSecret, secret_page

_NEW_SECRET = "_chat_api_new_secret"  # noqa: S105 (a request attribute name)
_ROTATE_PATH_SECRET = "_rotate_path_secret"  # noqa: S105 (the change form's button)


class ChatApiChannelForm(forms.ModelForm[ChatApiChannel]):
    name = forms.CharField(max_length=200)
    chunked = forms.BooleanField(
        required=False,
        label="Chunked encoding",
        help_text="Send agent messages with chunked transfer encoding instead of Content-Length.",
    )
    agents = ChannelAgentsField()
    active = forms.BooleanField(required=False, initial=True)

    class Meta:
        model = ChatApiChannel
        fields = ["webhook_url", "unique_message_ids"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            channel = self.instance.channel
            self.initial.update(
                name=channel.name,
                chunked=self.instance.endpoint.chunked,
                agents=list(channel.agents.all()),
                active=channel.is_active,
            )


@admin.register(ChatApiChannel)
class ChatApiChannelAdmin(admin.ModelAdmin[ChatApiChannel]):
    form = ChatApiChannelForm
    list_display = ["__str__", "public_id", "webhook_url", "is_active", "agent_count"]
    search_fields = ["channel__name", "channel__public_id", "webhook_url"]
    readonly_fields = ["public_id", "endpoint_url_field", "status_url_field", "delivery_log"]
    actions = ["rotate_secret", "rotate_path_secret"]
    # Save above the fields: Enter in a field presses the form's first submit
    # button, which would otherwise be the endpoint URL's Rotate.
    save_on_top = True

    class Media:
        js = ["admin/copy.js"]
        css = {"all": ["admin/switchboard.css"]}

    def get_fieldsets(self, request: HttpRequest, obj: ChatApiChannel | None = None) -> Any:
        settings_ = ("name", "webhook_url", "chunked", "agents", "active", "unique_message_ids")
        if obj is None:
            return [(None, {"fields": settings_})]
        urls = ("public_id", "endpoint_url_field", "status_url_field", "delivery_log")
        return [
            ("Give these to the integrator", {"fields": urls}),
            ("Settings", {"fields": settings_}),
        ]

    @admin.display(description="public id")
    def public_id(self, obj: ChatApiChannel) -> str:
        return obj.channel.public_id

    @admin.display(boolean=True, description="active")
    def is_active(self, obj: ChatApiChannel) -> bool:
        return obj.channel.is_active

    @admin.display(description="agents")
    def agent_count(self, obj: ChatApiChannel) -> int:
        return obj.channel.agents.count()

    @admin.display(description="Endpoint URL (A2: POST user messages)")
    def endpoint_url_field(self, obj: ChatApiChannel) -> SafeString:
        # A submit button of the change form (response_change): the page is
        # saved as it stands, then the URL rotated and shown once.
        return format_html(
            '{} <button type="submit" name="{}" class="button">{}</button>',
            copyable(obj.endpoint_url, "endpoint-url"),
            _ROTATE_PATH_SECRET,
            "Rotate (the old URL stops working at once)",
        )

    @admin.display(description="Status URL (A1: GET 0 or 1)")
    def status_url_field(self, obj: ChatApiChannel) -> SafeString:
        return copyable(obj.status_url, "status-url")

    @admin.display(description="Agent messages go to")
    def delivery_log(self, obj: ChatApiChannel) -> SafeString:
        log = (
            reverse("admin:delivery_delivery_changelist")
            + f"?endpoint__id__exact={obj.endpoint_id}"
        )
        return format_html('{} — <a href="{}">delivery log</a>', obj.target_url, log)

    def save_model(
        self, request: HttpRequest, obj: ChatApiChannel, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        options = {
            "name": data["name"],
            "webhook_url": data["webhook_url"],
            "chunked": data["chunked"],
            "agents": data["agents"],
            "unique_message_ids": data["unique_message_ids"],
            "by": audit.actor_of(request),
        }
        if change:
            services.update_chat_api_channel(chat_api=obj, active=data["active"], **options)
            return
        made, secret = services.create_chat_api_channel(**options)
        if not data["active"]:
            services.update_chat_api_channel(chat_api=made, active=False, **options)
        obj.pk, obj.channel, obj.endpoint = made.pk, made.channel, made.endpoint
        obj.path_secret = made.path_secret
        setattr(request, _NEW_SECRET, secret)

    def response_add(
        self, request: HttpRequest, obj: ChatApiChannel, post_url_continue: str | None = None
    ) -> HttpResponse:
        # The secret once, then on to the channel's page: it shows the URLs to hand over.
        page = reverse("admin:channels_api_chatapichannel_change", args=[obj.pk])
        return secret_page(
            request,
            [NewSecret(str(obj), page, getattr(request, _NEW_SECRET))],
            onward=("Go on to the channel: its URLs for the integrator", page),
        )

    def response_change(self, request: HttpRequest, obj: ChatApiChannel) -> HttpResponse:
        if _ROTATE_PATH_SECRET in request.POST:
            return self.rotate_path_secret(request, ChatApiChannel.objects.filter(pk=obj.pk))
        return super().response_change(request, obj)

    @admin.action(description="Rotate the signing secret (the old one signs for a grace period)")
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[ChatApiChannel]
    ) -> HttpResponseRedirect:
        chat_apis = queryset.select_related("endpoint", "channel")
        by = audit.actor_of(request)
        rotated = [(c, services.rotate_signing_secret(chat_api=c, by=by)) for c in chat_apis]
        return self._shown_once(request, rotated, kind=SIGNING_SECRET)

    @admin.action(description="Rotate the endpoint URL (the old URL stops working at once)")
    def rotate_path_secret(
        self, request: HttpRequest, queryset: QuerySet[ChatApiChannel]
    ) -> HttpResponseRedirect:
        chat_apis = queryset.select_related("channel")
        by = audit.actor_of(request)
        rotated = [
            (c, services.rotate_path_secret(chat_api=c, by=by).endpoint_url) for c in chat_apis
        ]
        return self._shown_once(request, rotated, kind=ENDPOINT_URL)

    def _shown_once(
        self, request: HttpRequest, rotated: list[tuple[ChatApiChannel, str]], *, kind: str
    ) -> HttpResponseRedirect:
        shown = [
            NewSecret(
                str(chat_api),
                reverse("admin:channels_api_chatapichannel_change", args=[chat_api.pk]),
                secret,
            )
            for chat_api, secret in rotated
        ]
        back = reverse("admin:channels_api_chatapichannel_changelist")
        return secret_page(request, shown, onward=("Back to the channels", back), kind=kind)
