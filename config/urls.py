from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import include, path
from django.views import defaults
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agents.api.errors import error_response


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
            },
        }
    )


def home(request: HttpRequest) -> HttpResponse:
    return redirect("/agent/")


urlpatterns = [
    path("", home),
    path("admin/", admin.site.urls),
    path("agent/", include("agents.urls")),
    path("api/agent/v1/", agent_api_root, name="agent-api-root"),
    path("api/agent/v1/", include("agents.api.urls")),
    path("", include("channels_api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema"),
        name="api-docs",
    ),
]


def _is_api(request: HttpRequest) -> bool:
    return not request.path.startswith(("/admin/", "/agent/"))


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return error_response(404, "not found")
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest, *args: Any) -> HttpResponse:
    if _is_api(request):
        return error_response(500, "the request could not be processed")
    return defaults.server_error(request)


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return error_response(400, "bad request")
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(
            {"error": {"code": "access_denied", "message": "access denied"}}, status=403
        )
    return defaults.permission_denied(request, exception)
