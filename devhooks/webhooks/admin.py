"""Admin: Integration settings for developers, one page (docs/webhooks.md).

Every change of the settings goes through ``devhooks.webhooks.services``, as
the command's does; a new signing secret is shown once, on the delivery app's
secret page.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents import audit
from delivery.admin import NewSecret, secret_page
from devhooks.models import EVENTS, IntegrationSettings
from devhooks.webhooks import services

_NEW_SECRET = "_devhooks_new_secret"  # noqa: S105 (a request attribute name)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class IntegrationSettingsForm(forms.ModelForm[IntegrationSettings]):
    webhook_url = forms.CharField(
        label="Webhook URL",
        max_length=2000,
        help_text="Events are POSTed here, signed (docs/webhooks.md).",
    )
    send_events = forms.BooleanField(
        label="Send events", required=False, initial=True, help_text="Off: nothing is sent."
    )
    event_names = forms.MultipleChoiceField(
        label="Events",
        choices=[(name, name) for name in EVENTS],
        widget=forms.CheckboxSelectMultiple,
        initial=list(EVENTS),
        help_text="Which events go out.",
    )
    domains = forms.CharField(
        label="Allowed domains",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line; their subdomains pass too. Used when Safe URL is on.",
    )
    rotate_secret = forms.BooleanField(
        label="Make a new signing secret",
        required=False,
        help_text="The old one keeps signing for a grace period.",
    )

    class Meta:
        model = IntegrationSettings
        fields = ["safe_url"]
        labels = {"safe_url": "Safe URL"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self.instance
        if current.endpoint is not None:
            self.fields["webhook_url"].initial = current.endpoint.url
            self.fields["send_events"].initial = current.endpoint.active
            self.fields["event_names"].initial = current.events or list(EVENTS)
            self.fields["domains"].initial = "\n".join(current.safe_url_domains)
        else:
            del self.fields["rotate_secret"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            services.validate_settings(
                url=data["webhook_url"],
                events=data["event_names"],
                safe_url_domains=_lines(data["domains"]),
            )
        except services.DevhookError as error:
            raise forms.ValidationError(error.message) from None
        return data


@admin.register(IntegrationSettings)
class IntegrationSettingsAdmin(admin.ModelAdmin[IntegrationSettings]):
    """One row per installation: the list page leads straight to it."""

    form = IntegrationSettingsForm
    readonly_fields = ["delivery_log"]

    def get_fieldsets(self, request: HttpRequest, obj: IntegrationSettings | None = None) -> Any:
        fields: list[str] = ["webhook_url", "send_events", "event_names", "safe_url", "domains"]
        if obj is not None and obj.endpoint is not None:
            fields += ["rotate_secret", "delivery_log"]
        return [(None, {"fields": fields})]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not IntegrationSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        current = IntegrationSettings.objects.first()
        if current is None:
            return HttpResponseRedirect(reverse("admin:devhooks_integrationsettings_add"))
        return HttpResponseRedirect(
            reverse("admin:devhooks_integrationsettings_change", args=[current.pk])
        )

    @admin.display(description="Delivery log")
    def delivery_log(self, obj: IntegrationSettings) -> SafeString:
        log = reverse("admin:delivery_delivery_changelist") + f"?purpose__exact={services.PURPOSE}"
        return format_html('<a href="{}">the events sent</a>', log)

    def save_model(
        self, request: HttpRequest, obj: IntegrationSettings, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        saved, secret = services.set_developer_webhook(
            url=data["webhook_url"],
            events=data["event_names"],
            safe_url_domains=_lines(data["domains"]),
            safe_url=data["safe_url"],
            rotate_secret=data.get("rotate_secret", False),
            active=data["send_events"],
            by=audit.actor_of(request),
        )
        obj.pk = saved.pk
        setattr(request, _NEW_SECRET, secret)

    def _answer(self, request: HttpRequest, obj: IntegrationSettings) -> HttpResponse | None:
        secret = getattr(request, _NEW_SECRET, None)
        if secret is None:
            return None
        page = reverse("admin:devhooks_integrationsettings_change", args=[obj.pk])
        return secret_page(
            request,
            [NewSecret("Developer webhooks", page, secret)],
            onward=("Back to the integration settings", page),
        )

    def response_add(
        self, request: HttpRequest, obj: IntegrationSettings, post_url_continue: str | None = None
    ) -> HttpResponse:
        return self._answer(request, obj) or super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: IntegrationSettings) -> HttpResponse:
        return self._answer(request, obj) or super().response_change(request, obj)
