from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest
from django.utils.text import Truncator

from agents.models import (
    Agent,
    ApiToken,
    Call,
    CallbackSettings,
    Channel,
    Chat,
    Client,
    Department,
    Message,
    OfflineMessage,
)

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
    list_display = ["name", "email", "is_online", "is_staff", "is_active"]
    list_filter = ["is_online", "is_staff", "is_active", "departments"]
    search_fields = ["name", "email", "phone"]
    filter_horizontal = ["departments", "groups", "user_permissions"]
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        ("Profile", {"fields": ("name", "phone", "photo_url", "is_online", "departments")}),
        (
            "Permissions",
            {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")},
        ),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": ("email", "name", "password1", "password2", "is_staff"),
            },
        ),
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


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin[Channel]):
    list_display = ["name", "kind", "public_id", "is_active"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "public_id"]
    filter_horizontal = ["agents"]
    readonly_fields = ["public_id", "created"]
    inlines = [CallbackSettingsInline]


@admin.register(Client)
class ClientAdmin(admin.ModelAdmin[Client]):
    list_display = ["visitor_number", "name", "email", "phone", "channel", "created"]
    list_filter = ["channel"]
    search_fields = ["name", "email", "phone", "external_id"]
    readonly_fields = ["visitor_number", "external_id", "external_id_raw", "created"]


class ReadOnlyMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


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

    list_display = ["id", "state", "channel", "client", "rating", "blacklisted", "created"]
    list_filter = ["state", "channel", "rating", "blacklisted"]
    search_fields = ["client__name", "client__email", "messages__text"]
    inlines = [MessageInline]
    readonly_fields = [f.name for f in Chat._meta.get_fields() if f.concrete]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyMixin, admin.ModelAdmin[ApiToken]):
    list_display = ["agent", "created"]
    fields = readonly_fields = ("agent", "created")


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
