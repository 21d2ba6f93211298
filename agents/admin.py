from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from agents.models import Agent, ApiToken, Channel, Chat, Client, Department, Message


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


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin[Channel]):
    list_display = ["name", "kind", "public_id", "is_active"]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "public_id"]
    filter_horizontal = ["agents"]
    readonly_fields = ["public_id", "created"]


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
