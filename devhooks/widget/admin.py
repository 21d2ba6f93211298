"""Admin: website widgets (docs/widget.md). A widget is made with its
channel by ``devhooks.widget.services.create_widget_channel``, as the command
makes it; its page shows the code for the site.
"""

from __future__ import annotations

from datetime import time
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents import audit
from agents.admin import ChannelAgentsField, copyable
from agents.models import CallbackSettings, Department
from devhooks.models import WidgetChannel
from devhooks.widget import services as widgets

INVITATION_KEYS = ("text", "after_seconds", "url_contains", "department_id")
# Callback hours as ``create_widget_channel`` sets them: the channel's page narrows them.
ALL_DAY: dict[str, Any] = {
    "working_days": [1, 2, 3, 4, 5, 6, 7],
    "opens_at": time(0, 0),
    "closes_at": time(23, 59, 59, 999999),
}


def _storable(text: str) -> bool:
    """PostgreSQL keeps no NUL in JSON, and no text that is not UTF-8."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _rules_error(rules: Any, departments: list[Department]) -> str:
    """Why ``rules`` is not the shape the widget reads (docs/widget.md,
    "Rules"), or "" when it is."""
    if not isinstance(rules, dict) or set(rules) - {"invitations"}:
        return 'Rules are an object: {"invitations": [...]}.'
    invitations = rules.get("invitations", [])
    if not isinstance(invitations, list):
        return '"invitations" is a list.'
    offered = {department.pk for department in departments}
    for number, invitation in enumerate(invitations, start=1):
        where = f"Invitation {number}"
        if not isinstance(invitation, dict):
            return f"{where} is an object."
        if set(invitation) - set(INVITATION_KEYS):
            return f"{where} may hold only {', '.join(INVITATION_KEYS)}."
        text, after = invitation.get("text"), invitation.get("after_seconds", 0)
        if not isinstance(text, str) or not text.strip():
            return f"{where} needs a text."
        if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= 86400:
            return f"{where}: after_seconds is a whole number of seconds, 0 to 86400."
        if not isinstance(invitation.get("url_contains", ""), str):
            return f"{where}: url_contains is a string (empty: every page)."
        if not all(_storable(invitation.get(key, "")) for key in ("text", "url_contains")):
            return f"{where} holds a NUL or a lone surrogate character."
        department_id = invitation.get("department_id")
        if department_id is not None and (
            isinstance(department_id, bool) or department_id not in offered
        ):
            return f"{where}: department_id is null or a department this widget offers."
    return ""


class RulesField(forms.JSONField):
    def prepare_value(self, value: Any) -> Any:
        shown = super().prepare_value(value)
        # A lone surrogate (typed as \ud83d) is shown back as typed: as a
        # character it cannot be sent as UTF-8.
        return shown.encode(errors="backslashreplace").decode() if isinstance(shown, str) else shown


class WidgetChannelForm(forms.ModelForm[WidgetChannel]):
    """The widget's settings, and its channel's name, agents and switch."""

    name = forms.CharField(max_length=200)
    agents = ChannelAgentsField(help_text="Agents who receive chats from this widget.")
    callback = forms.BooleanField(
        label="Take callback requests",
        required=False,
        help_text="Every day, all day, until the hours are narrowed on the channel's page.",
    )
    active = forms.BooleanField(
        required=False, initial=True, help_text="Off: the script answers 404 and shows nothing."
    )

    class Meta:
        model = WidgetChannel
        fields = [
            "title", "language", "color", "color2", "departments", "offline_form", "waiting_text",
            "prechat_name", "prechat_email", "prechat_phone", "consent_text", "rules",
        ]  # fmt: skip
        field_classes = {"rules": RulesField}
        help_texts = {
            "rules": 'Proactive invitations: {"invitations": [{"text": "Need a hand?", '
            '"after_seconds": 20, "url_contains": "", "department_id": null}]}, each shown '
            "once per visitor on pages whose URL holds url_contains (empty: every page).",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            channel = self.instance.channel
            callback = CallbackSettings.objects.filter(channel=channel).first()
            self.initial.update(
                name=channel.name,
                agents=list(channel.agents.all()),
                callback=callback is not None and callback.enabled,
                active=channel.is_active,
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("rules") in (None, ""):
            data["rules"] = {"invitations": []}
        if "rules" in data and "departments" in data:
            problem = _rules_error(data["rules"], list(data["departments"]))
            if problem:
                self.add_error("rules", problem)
        return data


@admin.register(WidgetChannel)
class WidgetChannelAdmin(admin.ModelAdmin[WidgetChannel]):
    """A website widget: made with its channel by ``create_widget_channel``,
    as the command makes it; its page hands over the code for the site."""

    form = WidgetChannelForm
    list_display = ["__str__", "widget_id", "title", "is_active", "agent_count"]
    list_select_related = ["channel"]
    search_fields = ["channel__name", "channel__public_id", "title"]
    filter_horizontal = ["departments"]
    readonly_fields = [
        "widget_id", "embed_code_field", "stub_code_field", "channel_page", "consent_version",
    ]  # fmt: skip

    class Media:
        js = ["admin/copy.js"]
        css = {"all": ["admin/switchboard.css"]}

    def get_fieldsets(self, request: HttpRequest, obj: WidgetChannel | None = None) -> Any:
        channel = ("name", "agents", "active", "callback")
        looks = (
            "title", "language", "color", "color2", "departments", "offline_form", "waiting_text",
            "prechat_name", "prechat_email", "prechat_phone", "consent_text", "rules",
        )  # fmt: skip
        if obj is None:
            return [("Channel", {"fields": channel}), ("Widget", {"fields": looks})]
        code = ("widget_id", "embed_code_field", "stub_code_field")
        return [
            ("Put this on the site's pages", {"fields": code}),
            ("Channel", {"fields": (*channel, "channel_page")}),
            ("Widget", {"fields": (*looks, "consent_version")}),
        ]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Its chats and visitors belong to the channel: switch it off instead.
        return False

    @admin.display(description="widget id", ordering="channel__public_id")
    def widget_id(self, obj: WidgetChannel) -> str:
        return obj.widget_id

    @admin.display(boolean=True, description="active", ordering="channel__is_active")
    def is_active(self, obj: WidgetChannel) -> bool:
        return obj.channel.is_active

    @admin.display(description="agents")
    def agent_count(self, obj: WidgetChannel) -> int:
        return obj.channel.agents.count()

    @admin.display(description="Embed code (before </body> on every page)")
    def embed_code_field(self, obj: WidgetChannel) -> SafeString:
        return copyable(obj.embed_code, "widget-embed-code")

    @admin.display(description="Pre-load stub (optional, before the embed code)")
    def stub_code_field(self, obj: WidgetChannel) -> SafeString:
        return format_html(
            '<pre id="{}" class="pretty">{}</pre>'
            '<button type="button" class="button" data-copy="{}">Copy</button>'
            '<div class="help">Only for pages that call svc_api before the script has '
            "loaded: the calls wait in a queue and run in order once it has.</div>",
            "widget-stub-code",
            obj.stub_code,
            "widget-stub-code",
        )

    @admin.display(description="Callback hours")
    def channel_page(self, obj: WidgetChannel) -> SafeString:
        page = reverse("admin:agents_channel_change", args=[obj.channel_id])
        return format_html('<a href="{}">days, hours and time zone on the channel page</a>', page)

    def save_model(self, request: HttpRequest, obj: WidgetChannel, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            made = widgets.create_widget_channel(
                name=data["name"],
                callback=data["callback"],
                title=data["title"],
                departments=data["departments"],
                by=audit.actor_of(request),
            )
            obj.pk, obj.channel, obj.title = made.pk, made.channel, made.title
            obj._state.adding = False
        channel = obj.channel
        channel.name, channel.is_active = data["name"], data["active"]
        channel.save(update_fields=["name", "is_active"])
        # By the rows picked, not by their e-mails as the service takes them:
        # it looks e-mails up in lower case, an admin-made agent may have capitals.
        channel.agents.set(data["agents"])
        callback = CallbackSettings.objects.filter(channel=channel).first()
        if callback is None:
            callback = CallbackSettings(channel=channel, **ALL_DAY)
        if callback.pk is None or callback.enabled != data["callback"]:
            callback.enabled = data["callback"]
            callback.save()
        if "consent_text" in form.changed_data:
            # A new text is a new version: chats keep which one was accepted.
            obj.consent_version += 1
        obj.save()
        if change:
            audit.record(
                audit.Action.CHANNEL_CHANGED,
                actor=audit.actor_of(request),
                target=audit.of_channel(channel),
                fields=",".join(form.changed_data),
            )

    def response_add(
        self, request: HttpRequest, obj: WidgetChannel, post_url_continue: str | None = None
    ) -> HttpResponse:
        if "_addanother" in request.POST or "_popup" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        # On to its page: the code for the site is there.
        self.message_user(request, f"The widget “{obj}” was added: put its code on the site.")
        return HttpResponseRedirect(reverse("admin:devhooks_widgetchannel_change", args=[obj.pk]))
