"""Admin: bot providers, and attaching one to a channel (docs/bot-api.md).

Every change goes through ``bots.services``, as the commands' do.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents import audit
from agents.admin import copyable
from agents.models import Channel
from bots import services
from bots.models import BotAttachment, BotProvider
from delivery.admin import NewSecret, secret_page

_NEW_SECRET = "_bot_new_secret"  # noqa: S105 (a request attribute name)


class BotProviderForm(forms.ModelForm[BotProvider]):
    class Meta:
        model = BotProvider
        fields = ["name", "display_name", "endpoint_url", "is_active"]


@admin.register(BotProvider)
class BotProviderAdmin(admin.ModelAdmin[BotProvider]):
    form = BotProviderForm
    list_display = [
        "name",
        "display_name",
        "endpoint_url",
        "provider_id",
        "is_active",
        "attachment_count",
    ]
    search_fields = ["name", "display_name", "endpoint_url"]
    readonly_fields = ["provider_id", "webhook_url_prefix_field"]

    class Media:
        js = ["admin/copy.js"]
        css = {"all": ["admin/switchboard.css"]}

    def get_fieldsets(self, request: HttpRequest, obj: BotProvider | None = None) -> Any:
        settings_ = ("name", "display_name", "endpoint_url", "is_active")
        if obj is None:
            return [(None, {"fields": settings_})]
        return [
            ("Give this to the provider", {"fields": ("provider_id", "webhook_url_prefix_field")}),
            ("Settings", {"fields": settings_}),
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[BotProvider]:
        return super().get_queryset(request).annotate(attachment_count=Count("attachments"))

    @admin.display(description="attachments", ordering="attachment_count")
    def attachment_count(self, obj: BotProvider) -> int:
        return obj.attachment_count  # type: ignore[attr-defined]  # the annotation above

    @admin.display(description="Webhook URL prefix (B2: the provider adds its token)")
    def webhook_url_prefix_field(self, obj: BotProvider) -> SafeString:
        return copyable(obj.webhook_url_prefix, "webhook-url-prefix")

    def save_model(self, request: HttpRequest, obj: BotProvider, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.update_bot_provider(
                provider=obj,
                name=data["name"],
                endpoint_url=data["endpoint_url"],
                display_name=data["display_name"],
                active=data["is_active"],
                by=audit.actor_of(request),
            )
            return
        made = services.create_bot_provider(
            name=data["name"],
            endpoint_url=data["endpoint_url"],
            display_name=data["display_name"],
            by=audit.actor_of(request),
        )
        if not data["is_active"]:
            services.update_bot_provider(
                provider=made,
                name=made.name,
                endpoint_url=made.endpoint_url,
                display_name=made.display_name,
                active=False,
                by=audit.actor_of(request),
            )
        obj.pk, obj.provider_id = made.pk, made.provider_id


class BotAttachmentForm(forms.ModelForm[BotAttachment]):
    channel = forms.ModelChoiceField(
        queryset=Channel.objects.order_by("name"), help_text="One bot per channel."
    )
    bot_token = forms.CharField(
        label="Token",
        max_length=255,
        help_text="The token the provider generated for this channel.",
    )

    class Meta:
        model = BotAttachment
        fields = ["channel", "provider"]

    def clean_bot_token(self) -> str:
        token: str = self.cleaned_data["bot_token"]
        if not services.TOKEN.fullmatch(token):
            raise ValidationError(
                "8 to 255 characters of letters, digits and . _ ~ - (the last segment of a URL)"
            )
        return token


class BotAttachmentChangeForm(forms.ModelForm[BotAttachment]):
    class Meta:
        model = BotAttachment
        fields = ["is_active"]


@admin.register(BotAttachment)
class BotAttachmentAdmin(admin.ModelAdmin[BotAttachment]):
    list_display = ["__str__", "channel", "provider", "is_active"]
    list_filter = ["is_active", "provider"]
    search_fields = ["channel__name", "channel__public_id", "provider__name"]
    readonly_fields = ["channel", "provider", "target", "delivery_log"]
    actions = ["rotate_secret"]

    def get_form(
        self,
        request: HttpRequest,
        obj: BotAttachment | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        kwargs["form"] = BotAttachmentChangeForm if obj else BotAttachmentForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: BotAttachment | None = None) -> Any:
        if obj is None:
            return [(None, {"fields": ("channel", "provider", "bot_token")})]
        return [(None, {"fields": ("channel", "provider", "target", "delivery_log", "is_active")})]

    def get_readonly_fields(self, request: HttpRequest, obj: BotAttachment | None = None) -> Any:
        return self.readonly_fields if obj else []

    @admin.display(description="B1 events go to")
    def target(self, obj: BotAttachment) -> str:
        return obj.target_url

    @admin.display(description="Delivery log")
    def delivery_log(self, obj: BotAttachment) -> SafeString:
        log = (
            reverse("admin:delivery_delivery_changelist")
            + f"?endpoint__id__exact={obj.endpoint_id}"
        )
        return format_html('<a href="{}">the events sent to the provider</a>', log)

    def save_model(self, request: HttpRequest, obj: BotAttachment, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.set_attachment_active(
                attachment=obj, active=data["is_active"], by=audit.actor_of(request)
            )
            return
        made, secret = services.attach_bot(
            channel=data["channel"],
            provider=data["provider"],
            token=data["bot_token"],
            by=audit.actor_of(request),
        )
        obj.pk, obj.endpoint = made.pk, made.endpoint
        setattr(request, _NEW_SECRET, secret)

    def response_add(
        self, request: HttpRequest, obj: BotAttachment, post_url_continue: str | None = None
    ) -> HttpResponse:
        page = reverse("admin:bots_botattachment_change", args=[obj.pk])
        return secret_page(
            request,
            [NewSecret(str(obj), page, getattr(request, _NEW_SECRET))],
            onward=("Go on to the attachment", page),
        )

    def delete_model(self, request: HttpRequest, obj: BotAttachment) -> None:
        services.detach_bot(channel=obj.channel, by=audit.actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[BotAttachment]) -> None:
        for attachment in queryset.select_related("channel"):
            services.detach_bot(channel=attachment.channel, by=audit.actor_of(request))

    @admin.action(description="Rotate the signing secret (the old one signs for a grace period)")
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[BotAttachment]
    ) -> HttpResponseRedirect:
        by = audit.actor_of(request)
        rotated = [
            NewSecret(
                str(attachment),
                reverse("admin:bots_botattachment_change", args=[attachment.pk]),
                services.rotate_signing_secret(attachment=attachment, by=by),
            )
            for attachment in queryset.select_related("endpoint", "channel", "provider")
        ]
        back = reverse("admin:bots_botattachment_changelist")
        return secret_page(request, rotated, onward=("Back to the attachments", back))
