"""The project's URLconf plus one API view that is not CSRF-exempt, to see
what a failed CSRF check on an API path answers."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import urlpatterns as project


def protected(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [path("api/csrf-protected", protected), *project]
