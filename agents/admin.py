from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms.renderers import BaseRenderer
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from agents import audit, hours, mail, privacy, reports, second_factor, services, sessions, tokens
from agents.models import (
    Agent,
    ApiToken,
    AuditEntry,
    BlacklistedClient,
    Call,
    CallbackSettings,
    CannedReply,
    Channel,
    Chat,
    Client,
    ClientAddress,
    Department,
    Label,
    Mail,
    Message,
    OfflineMessage,
)
from agents.templatetags.agent_pages import browser

admin.site.site_header = "Switchboard admin"
admin.site.site_title = "Switchboard admin"
admin.site.index_title = "Channels, agents, chats and the delivery log"
admin.site.unregister(Group)  # agents' rights are their role: groups are unused
# django-otp's own pages would show an app's key and add devices unaudited:
# the agents' reset action is the admin's one way to change a second factor.
admin.site.unregister(TOTPDevice)
admin.site.unregister(StaticDevice)

ISO_WEEKDAYS = [
    (1, "Monday"),
    (2, "Tuesday"),
    (3, "Wednesday"),
    (4, "Thursday"),
    (5, "Friday"),
    (6, "Saturday"),
    (7, "Sunday"),
]


@admin.register(Agent)
class AgentAdmin(UserAdmin):
    ordering = ["name"]
    list_display = ["name", "email", "role", "is_online", "is_active"]
    list_filter = ["role", "is_online", "is_active", "departments"]
    search_fields = ["name", "email", "phone"]
    filter_horizontal = ["departments"]
    # Rights are the role (is_staff / is_superuser follow it: Agent.save): no
    # groups (unregistered) nor per-user permissions.
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        (
            "Profile",
            {"fields": ("name", "phone", "photo_url", "language", "is_online", "departments")},
        ),
        ("Routing", {"fields": ("max_chats",)}),
        ("Permissions", {"fields": ("is_active", "role")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
        ("Signed-in sessions", {"fields": ("signed_in_sessions",)}),
    )
    # Shown, not a formset: the agent signs them out on the settings page.
    readonly_fields = ["signed_in_sessions"]
    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": ("email", "name", "password1", "password2", "role"),
            },
        ),
    )

    actions = ["reset_second_factor"]

    @admin.action(description="Reset the selected agents' two-factor sign-in")
    def reset_second_factor(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        """For a lost phone and lost recovery codes: the agent signs in with
        the password alone, and sets a second factor up again."""
        admin_agent = audit.actor_of(request)
        assert admin_agent is not None  # the admin is for signed-in admins only
        done = [agent for agent in queryset if second_factor.reset(agent=agent, by=admin_agent)]
        if done:
            names = ", ".join(agent.email for agent in done)
            self.message_user(request, f"Two-factor sign-in reset for {names}.", messages.SUCCESS)
        else:
            self.message_user(request, "None of them had two-factor sign-in.", messages.WARNING)

    @admin.display(description="Sessions")
    def signed_in_sessions(self, obj: Agent) -> SafeString | str:
        """The agent's signed-in sessions (docs/security.md, "Sessions")."""
        rows = sessions.sessions_of(obj) if obj.pk else []
        return (
            format_html_join(
                "",
                "<div>{} · {} · signed in {} · last seen {}</div>",
                (
                    (
                        browser(row.user_agent) or "an unknown browser",
                        row.ip or "no address",
                        f"{row.signed_in_at:%Y-%m-%d %H:%M}",
                        f"{row.last_seen_at:%Y-%m-%d %H:%M}",
                    )
                    for row in rows
                ),
            )
            or "none"
        )

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        """Saved as Django's admin saves it; a new agent, a new role and a new
        maximum of chats go to the audit log (docs/security.md)."""
        super().save_model(request, obj, form, change)
        target, by = audit.of_agent(obj), audit.actor_of(request)
        if not change:
            audit.record(audit.Action.AGENT_CREATED, actor=by, target=target, role=obj.role)
            return
        for field, action in (
            ("role", audit.Action.AGENT_ROLE_CHANGED),
            ("max_chats", audit.Action.AGENT_CAPACITY_CHANGED),
        ):
            if field in form.changed_data:
                before = form.initial.get(field)
                audit.record(
                    action, actor=by, target=target, before=before, after=getattr(obj, field)
                )


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin[Department]):
    search_fields = ["name"]


class CallbackSettingsForm(forms.ModelForm[CallbackSettings]):
    """Working days as checkboxes (stored as ISO weekdays 1..7) and a time zone
    that ``zoneinfo`` knows, so that availability is computed as configured."""

    working_days = forms.TypedMultipleChoiceField(
        choices=ISO_WEEKDAYS, coerce=int, required=False, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = CallbackSettings
        fields = ["enabled", "working_days", "opens_at", "closes_at", "time_zone"]
        help_texts = {
            "time_zone": "An IANA time zone, e.g. Europe/Berlin: the hours are local to it.",
            "closes_at": "Requests are taken from the opening time up to, not including, this.",
        }

    def clean_working_days(self) -> list[int]:
        return sorted(set(self.cleaned_data["working_days"]))

    def clean_time_zone(self) -> str:
        name = str(self.cleaned_data["time_zone"]).strip()
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(
                f"{name!r} is not a time zone, e.g. Europe/Berlin"
            ) from None
        return name

    def clean(self) -> dict[str, Any] | None:
        data = super().clean()
        opens, closes = self.cleaned_data.get("opens_at"), self.cleaned_data.get("closes_at")
        if opens is not None and closes is not None and closes <= opens:
            self.add_error(
                "closes_at", "Closes after it opens (hours past midnight are not supported)."
            )
        return data


class CallbackSettingsInline(admin.StackedInline[CallbackSettings, Channel]):
    model = CallbackSettings
    form = CallbackSettingsForm
    can_delete = False
    verbose_name = verbose_name_plural = "callback"


def answering_agents() -> QuerySet[Agent]:
    """Whom a channel may give its chats: active agents, not the installation's superusers."""
    return Agent.objects.filter(is_active=True, is_superuser=False)


class AgentsPicker(FilteredSelectMultiple):
    """Django's two-list picker with the field's label before it and tied to it."""

    def __init__(self) -> None:
        super().__init__("agents", is_stacked=False)

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: BaseRenderer | None = None,
    ) -> SafeString:
        # SelectFilter2.js puts the picker first in the select's parent: a
        # parent of its own keeps the label before it, as Django's wrapper of
        # a model field's picker (RelatedFieldWidgetWrapper) does.
        return format_html(
            '<div class="related-widget-wrapper">{}</div>',
            super().render(name, value, attrs, renderer),
        )

    def id_for_label(self, id_: str, index: str = "0") -> str:
        # The script renames the select "<id>_from" (the list of agents to pick from).
        return f"{id_}_from" if id_ else id_


def copyable(value: str, element_id: str) -> SafeString:
    """A read-only text box with a Copy button (static/admin/copy.js)."""
    return format_html(
        '<input type="text" id="{}" value="{}" readonly size="90" class="copyable"> '
        '<button type="button" class="button" data-copy="{}">Copy</button>',
        element_id,
        value,
        element_id,
    )


class ChannelAgentsField(forms.ModelMultipleChoiceField):
    """A channel's agents, on every form that makes or edits a channel."""

    def __init__(self, *, help_text: str = "Agents who receive chats from this channel.") -> None:
        super().__init__(
            queryset=answering_agents(), required=False, widget=AgentsPicker(), help_text=help_text
        )


class ChannelForm(forms.ModelForm[Channel]):
    agents = ChannelAgentsField()
    # Business hours as the command writes them (agents/hours.py), a line each.
    weekly_hours = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="A line each, e.g. mon-fri 09:00-18:00 and sat 10:00-14:00. "
        "None and no dates closed: always open.",
    )
    dates_closed = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Dates the channel is closed, a line each (YYYY-MM-DD).",
    )

    class Meta:
        model = Channel
        fields = [
            "name", "is_active", "send_transcripts", "routing_mode", "offer_seconds",
            "idle_close_minutes", "idle_warning", "business_time_zone", "away_message", "agents",
        ]  # fmt: skip
        help_texts = {
            "business_time_zone": "An IANA time zone, e.g. Europe/Berlin: hours are local to it.",
            "away_message": "Sent to the client once per chat when they write while nobody can "
            "answer (outside the hours, or no agent online). Blank: none. The standard text, "
            f'"{hours.STANDARD_AWAY_MESSAGE}", goes out in the chat\'s language; '
            "your own as written.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        weekly = self.instance.business_hours or {}
        self.initial["weekly_hours"] = "\n".join(
            f"{day} {','.join(f'{a}-{b}' for a, b in spans)}" for day, spans in weekly.items()
        )
        self.initial["dates_closed"] = "\n".join(self.instance.closed_dates or [])

    def clean_business_time_zone(self) -> str:
        name = str(self.cleaned_data["business_time_zone"]).strip()
        try:
            hours.zone(name)
        except hours.BadHours as error:
            raise forms.ValidationError(str(error)) from None
        return name

    def clean_weekly_hours(self) -> hours.WeeklyHours:
        lines = [line for line in self.cleaned_data["weekly_hours"].splitlines() if line.strip()]
        try:
            return hours.parse_hours(lines)
        except hours.BadHours as error:
            raise forms.ValidationError(str(error)) from None

    def clean_dates_closed(self) -> list[str]:
        lines = [line for line in self.cleaned_data["dates_closed"].splitlines() if line.strip()]
        try:
            return sorted({hours.parse_date(line) for line in lines})
        except hours.BadHours as error:
            raise forms.ValidationError(str(error)) from None

    def save(self, commit: bool = True) -> Channel:
        self.instance.business_hours = self.cleaned_data["weekly_hours"]
        self.instance.closed_dates = self.cleaned_data["dates_closed"]
        return super().save(commit)


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin[Channel]):
    """Every channel, whatever its kind, for what they share (agents,
    callbacks, transcripts). A channel is made where its kind is: Chat API
    channels, Website widgets; here none can be added."""

    form = ChannelForm
    list_display = ["name", "kind", "public_id", "is_active"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "public_id"]
    readonly_fields = ["kind", "public_id", "created"]
    fields = [
        "name", "kind", "public_id", "is_active", "send_transcripts",
        "routing_mode", "offer_seconds", "idle_close_minutes", "idle_warning",
        "business_time_zone", "weekly_hours", "dates_closed", "away_message", "agents", "created",
    ]  # fmt: skip
    inlines = [CallbackSettingsInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # Which settings changed, not their values (an away message is text for clients).
        changed = [
            *form.changed_data,
            *(["callbacks"] if any(f.has_changed() for f in formsets) else []),
        ]
        if changed:
            audit.record(
                audit.Action.CHANNEL_CHANGED,
                actor=audit.actor_of(request),
                target=audit.of_channel(form.instance),
                fields=",".join(changed),
            )
        # A new mode acts on the chats waiting now, as the command's does (docs/routing.md).
        if {"routing_mode", "agents"} & set(form.changed_data):
            services.set_routing(channel=form.instance, mode=form.instance.routing_mode)


@admin.register(Client)
class ClientAdmin(admin.ModelAdmin[Client]):
    """Clients, with their data exported as JSON or erased on request
    (docs/privacy.md): both are links on a client's page."""

    list_display = ["visitor_number", "name", "email", "phone", "channel", "created", "erased_at"]
    list_filter = ["channel", ("erased_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "email", "phone", "external_id"]
    readonly_fields = [
        "visitor_number", "external_id", "external_id_raw", "created", "erased_at", "data",
    ]  # fmt: skip

    @admin.display(description="the client's data")
    def data(self, client: Client) -> SafeString | str:
        if client.pk is None:
            return ""
        export = reverse("admin:agents_client_export", args=[client.pk])
        if client.erased_at is not None:
            return format_html('<a href="{}">Export data (JSON)</a> · erased', export)
        erase = reverse("admin:agents_client_erase", args=[client.pk])
        return format_html(
            '<a href="{}">Export data (JSON)</a> · <a href="{}">Erase this client</a>',
            export,
            erase,
        )

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:pk>/export/", wrap(self.export_view), name="agents_client_export"),
            path("<int:pk>/erase/", wrap(self.erase_view), name="agents_client_erase"),
            *super().get_urls(),
        ]

    def export_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        client = get_object_or_404(Client, pk=pk)
        if not self.has_view_permission(request, client):
            raise PermissionDenied
        response = JsonResponse(
            privacy.export_client(client, by=_agent_of(request)), json_dumps_params={"indent": 2}
        )
        name = f"client-{client.visitor_number}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def erase_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        client = get_object_or_404(Client, pk=pk)
        if not self.has_delete_permission(request, client):
            raise PermissionDenied
        change = reverse("admin:agents_client_change", args=[client.pk])
        if request.method == "POST":
            try:
                erased = services.erase_client(client=client, by=_agent_of(request))
            except services.ServiceError as error:
                self.message_user(request, error.message, level=messages.ERROR)
            else:
                self.message_user(
                    request,
                    f"Erased: {erased['chats']} chat(s), {erased['messages']} message(s), "
                    f"{erased['files']} file(s).",
                )
            return HttpResponseRedirect(change)
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase this client",
            "client": client,
            "chats": client.chats.count(),
        }
        return TemplateResponse(request, "admin/agents/client/erase.html", context)


def _agent_of(request: HttpRequest) -> Agent | None:
    return request.user if isinstance(request.user, Agent) else None


class ReadOnlyMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ClientAddress)
class ClientAddressAdmin(ReadOnlyMixin, admin.ModelAdmin[ClientAddress]):
    """Who gave each client address, and whether transcripts may go to it
    (docs/transcripts.md): set by the services, read here."""

    list_display = ["address", "client", "source", "created", "confirmed_at", "confirmed_by"]
    list_filter = ["source"]
    search_fields = ["address"]
    list_select_related = ["client", "confirmed_by"]
    exclude = ["token_hash"]


class MessageInline(ReadOnlyMixin, admin.TabularInline[Message, Chat]):
    model = Message
    fields = readonly_fields = (
        "created",
        "author",
        "agent",
        "type",
        "text",
        "payload",
        "delivery_status",
        "delivery_error",
        "external_id",
    )
    extra = 0


@admin.register(Chat)
class ChatAdmin(ReadOnlyMixin, admin.ModelAdmin[Chat]):
    """Chats are read-only here: their state changes through the services only."""

    list_display = [
        "id", "state", "channel", "client", "agent", "labels_shown", "rating", "blacklisted",
        "created",
    ]  # fmt: skip
    list_filter = ["state", "channel", "labels", "rating", "blacklisted"]
    search_fields = ["client__name", "client__email", "messages__text"]
    list_select_related = ["channel", "client"]
    inlines = [MessageInline]
    readonly_fields = [f.name for f in Chat._meta.get_fields() if f.concrete]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chat]:
        return super().get_queryset(request).prefetch_related("agents", "labels")

    @admin.display(description="agent")
    def agent(self, chat: Chat) -> str:
        """Who answers (or answered) the chat; "-" while nobody took it."""
        return ", ".join(agent.name or agent.email for agent in chat.agents.all()) or "-"

    @admin.display(description="labels")
    def labels_shown(self, chat: Chat) -> SafeString:
        chips = [swatch(label) for label in chat.labels.all()]
        return format_html_join(" ", "{}", ((chip,) for chip in chips)) or SafeString("-")


def swatch(label: Label) -> SafeString:
    """The label's name after a square of its colour: an SVG's fill, which
    the pages' Content-Security-Policy allows where a style attribute is not."""
    return format_html(
        '<svg width="12" height="12" viewBox="0 0 12 12" aria-hidden="true">'
        '<rect width="12" height="12" rx="2" fill="{}"/></svg> {}',
        label.colour,
        label.name,
    )


class LabelForm(forms.ModelForm[Label]):
    class Meta:
        model = Label
        fields = ["name", "colour"]
        help_texts = {"colour": "#rrggbb: the colour of the label's chip on the agent pages."}

    def clean_name(self) -> str:
        # Unique whatever the case, as the create_label command has it.
        name = str(self.cleaned_data["name"]).strip()
        taken = Label.objects.filter(name__iexact=name).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"a label named {name} exists already")
        return name


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin[Label]):
    """The list agents label chats from (also ``manage.py create_label``).
    Deleting a label takes it off every chat that had it."""

    form = LabelForm
    list_display = ["swatched_name", "colour", "created"]
    search_fields = ["name"]
    readonly_fields = ["created"]

    @admin.display(description="name", ordering="name")
    def swatched_name(self, label: Label) -> SafeString:
        return swatch(label)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyMixin, admin.ModelAdmin[ApiToken]):
    """Tokens are made by their agents (the settings page); an admin may
    revoke one (a lost laptop): the key and its open streams stop at once."""

    list_display = ["agent", "created"]
    fields = readonly_fields = ("agent", "created")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        tokens.revoke_token(agent=obj.agent, by=audit.actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset.select_related("agent"):
            tokens.revoke_token(agent=token.agent, by=audit.actor_of(request))


@admin.register(Call)
class CallAdmin(ReadOnlyMixin, admin.ModelAdmin[Call]):
    """Calls are read-only here: agents record their steps (agents.services)."""

    list_display = ["id", "type", "phone", "status", "channel", "client", "agent", "created"]
    list_filter = ["status", "type", "channel"]
    search_fields = ["phone", "client__name", "reason"]
    list_select_related = ["channel", "client", "agent"]
    readonly_fields = [f.name for f in Call._meta.get_fields() if f.concrete]


class HandledFilter(admin.SimpleListFilter):
    title = parameter_name = "handled"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "Not yet"), ("yes", "Handled")]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        if self.value() in ("yes", "no"):
            return queryset.filter(handled_at__isnull=self.value() == "no")
        return queryset


@admin.register(OfflineMessage)
class OfflineMessageAdmin(ReadOnlyMixin, admin.ModelAdmin[OfflineMessage]):
    """What visitors left while nobody was online; agents mark them handled."""

    list_display = ["created", "channel", "name", "email", "phone", "short_message", "handled_at"]
    list_filter = [HandledFilter, "channel"]
    search_fields = ["name", "email", "phone", "message"]
    list_select_related = ["channel"]
    readonly_fields = [f.name for f in OfflineMessage._meta.get_fields() if f.concrete]

    @admin.display(description="message")
    def short_message(self, offline: OfflineMessage) -> str:
        return Truncator(offline.message).chars(80)


@admin.register(Mail)
class MailAdmin(ReadOnlyMixin, admin.ModelAdmin[Mail]):
    """The e-mail outbox: what was sent, what waits for a retry, and what
    failed (with the server's last answer); a failed mail can be sent again."""

    list_display = ["created", "status", "attempts", "to", "subject", "last_error_short", "sent_at"]
    list_filter = ["status"]
    search_fields = ["to", "subject"]
    readonly_fields = [f.name for f in Mail._meta.get_fields() if f.concrete]
    actions = ["send_again"]

    @admin.display(description="last error")
    def last_error_short(self, mail: Mail) -> str:
        return Truncator(mail.last_error).chars(80)

    def has_send_again_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("agents.change_mail")

    @admin.action(description="Send the selected failed mails again", permissions=["send_again"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[Mail]) -> None:
        failed = list(queryset.filter(status=Mail.Status.FAILED))
        for item in failed:
            mail.send_again(mail=item)
        self.message_user(request, f"{len(failed)} mail(s) will be sent again.")


@admin.register(BlacklistedClient)
class BlacklistedClientAdmin(ReadOnlyMixin, admin.ModelAdmin[BlacklistedClient]):
    """Clients an agent blacklisted: their messages are kept but reach no one.
    The action lifts the blacklist (``services.lift_blacklist``)."""

    list_display = [
        "visitor_number",
        "name",
        "email",
        "channel",
        "blacklisted_at",
        "blacklisted_by",
        "blacklist_reason",
    ]
    list_filter = ["channel"]
    search_fields = ["name", "email", "external_id"]
    actions = ["lift"]

    def has_lift_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("agents.change_client")

    @admin.action(description="Lift the blacklist of the selected clients", permissions=["lift"])
    def lift(self, request: HttpRequest, queryset: QuerySet[BlacklistedClient]) -> None:
        lifted = list(queryset)
        for client in lifted:
            services.lift_blacklist(client=client, by=audit.actor_of(request))
        self.message_user(request, f"{len(lifted)} client(s) may write again.")


@admin.register(CannedReply)
class CannedReplyAdmin(admin.ModelAdmin[CannedReply]):
    """Shared replies (no owner) are for every agent; personal ones for their owner."""

    list_display = ["shortcut", "owner", "text", "updated"]
    list_filter = [("owner", admin.EmptyFieldListFilter)]
    search_fields = ["shortcut", "text"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyMixin, admin.ModelAdmin[AuditEntry]):
    """The audit log (docs/security.md, "Audit log"): written by the verbs,
    read here; nobody adds, changes or deletes an entry (the beat forgets
    them after AUDIT_RETENTION_DAYS)."""

    list_display = ["at", "actor_label", "action", "target", "ip"]
    list_filter = ["action", ("at", admin.DateFieldListFilter)]
    search_fields = ["actor_label", "target", "ip"]
    date_hierarchy = "at"
    readonly_fields = ["at", "actor", "actor_label", "action", "target", "ip", "detail"]
    actions = ["download_csv"]

    @admin.action(description="Download the selected entries as CSV")
    def download_csv(self, request: HttpRequest, queryset: QuerySet[AuditEntry]) -> HttpResponse:
        rows = (audit.as_row(entry) for entry in queryset.order_by("-at", "-id"))
        answer = HttpResponse(
            reports.as_csv(rows, audit.ROW_FIELDS), content_type="text/csv; charset=utf-8"
        )
        answer["Content-Disposition"] = 'attachment; filename="audit.csv"'
        return answer
