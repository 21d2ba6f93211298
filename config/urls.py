from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agents.pages import addresses as address_pages
from agents.pages import files as agent_files
from agents.streams import agent_api_stream
from config import errors
from config.api_errors import allow_methods


@extend_schema(exclude=True)
@api_view(["GET"])
@permission_classes([AllowAny])
def agent_api_root(request: Request) -> Response:
    """What the agent API offers, with links to its schema and docs."""
    base = request.build_absolute_uri("/api/agent/v1/")
    return Response(
        {
            "name": "Switchboard agent API",
            "auth": "Authorization: Token <key>",
            "docs": request.build_absolute_uri("/api/docs/"),
            "schema": request.build_absolute_uri("/api/schema/"),
            "endpoints": {
                "status": f"{base}status",
                "chats": f"{base}chats",
                "chat": f"{base}chats/{{id}}",
                "messages": f"{base}chats/{{id}}/messages",
                "accept": f"{base}chats/{{id}}/accept",
                "finish": f"{base}chats/{{id}}/finish",
                "typing": f"{base}chats/{{id}}/typing",
                "stream": f"{base}stream",
                "assign": f"{base}chats/{{id}}/assign",
                "notes": f"{base}chats/{{id}}/notes",
                "files": f"{base}chats/{{id}}/files",
                "transfer": f"{base}chats/{{id}}/transfer",
                "transcript": f"{base}chats/{{id}}/transcript",
                "client_email": f"{base}chats/{{id}}/client-email",
                "blacklist": f"{base}chats/{{id}}/blacklist",
                "calls": f"{base}calls",
                "call_progress": f"{base}calls/{{id}}/progress",
                "offline_messages": f"{base}offline-messages",
                "offline_message_handled": f"{base}offline-messages/{{id}}/handled",
            },
        }
    )


def home(request: HttpRequest) -> HttpResponse:
    return redirect("/agent/")


urlpatterns = [
    path("", home),
    # The admin's sign-in shows "Forgotten your password?" when this name
    # exists: admins are agents, and reset theirs as agents do.
    path(
        "admin/password_reset/",
        RedirectView.as_view(pattern_name="agent:password-forgot"),
        name="admin_password_reset",
    ),
    path("admin/", admin.site.urls),
    path("agent/", include("agents.urls")),
    path("files/<str:token>/<str:name>", agent_files.download, name="file"),
    path("files/<str:token>/thumb/<str:name>", agent_files.thumbnail, name="file-thumb"),
    path("api/agent/v1/", agent_api_root, name="agent-api-root"),
    path("api/agent/v1/stream", agent_api_stream, name="agent-api-stream"),
    path("mail/confirm/<str:token>", address_pages.confirm, name="confirm-address"),
    path("api/agent/v1/", include("agents.api.urls")),
    path("", include("channels_api.urls")),
    path("", include("bots.urls")),
    path("", include("devhooks.urls")),
    path("api/schema/", allow_methods("GET", "HEAD")(SpectacularAPIView.as_view()), name="schema"),
    path(
        "api/docs/",
        # The split view serves Swagger UI's start-up script as a file: no inline
        # script under the Content-Security-Policy.
        allow_methods("GET", "HEAD")(
            SpectacularSwaggerSplitView.as_view(
                url_name="schema", template_name="api/swagger_ui.html"
            )
        ),
        name="api-docs",
    ),
    path("api/docs", RedirectView.as_view(url="/api/docs/")),
    # Last: whatever no view above took under an API prefix is a 404 error body
    # (config/errors.py), for any method and whatever DEBUG says.
    re_path(errors.API_PATHS, errors.api_not_found),
]

handler400 = errors.handler400
handler403 = errors.handler403
handler404 = errors.handler404
handler500 = errors.handler500
