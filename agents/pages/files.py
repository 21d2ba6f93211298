"""Files: the reply box's attach (agents) and the public file URL that the
message carries (docs/agent-pages.md, "Files")."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from agents import attachments
from agents.pages.workspace import _act, _chat, _refused
from agents.services import ServiceError

logger = logging.getLogger(__name__)


@login_required
@require_POST
def attach(request: HttpRequest, chat_id: int) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        return _refused(
            request, ServiceError(gettext_lazy("choose a file first")), _chat(request, chat_id)
        )
    text = request.POST.get("text", "")
    return _act(
        request,
        chat_id,
        lambda chat, agent: attachments.send_file(chat=chat, agent=agent, upload=upload, text=text),
    )


def _serve(token: str, name: str, *, thumb: bool) -> FileResponse:
    attachment = attachments.attachment_for(token, name)
    field = None if attachment is None else (attachment.thumb if thumb else attachment.file)
    if attachment is None or not field:
        raise Http404("no such file")
    try:
        opened = field.open("rb")
    except FileNotFoundError:
        # The row outlived its object (a storage cleaned by hand, a lost
        # bucket): for the client it is no file at all, for the operator a warning.
        logger.warning("files.missing_from_storage attachment=%s", attachment.pk)
        raise Http404("no such file") from None
    inline = thumb or attachment.content_type.startswith("image/")
    response = FileResponse(
        opened,
        content_type=attachments.content_type_of(attachment, thumb=thumb),
        as_attachment=not inline,
        filename=attachment.file_name,
    )
    # A file is never a page of ours: no sniffing, no scripts, no framing.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=86400"
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_GET
def download(request: HttpRequest, token: str, name: str) -> FileResponse:
    return _serve(token, name, thumb=False)


@require_GET
def thumbnail(request: HttpRequest, token: str, name: str) -> FileResponse:
    return _serve(token, name, thumb=True)
