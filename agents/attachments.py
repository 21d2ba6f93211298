"""Files an agent sends from the reply box (docs/agent-pages.md, "Files").

A file is checked by what it is, not by its name: its first bytes say its
kind (PNG, JPEG, GIF, WebP, PDF, ZIP and the Office files built on it, plain
text), and an image must open in Pillow. SVG, HTML and anything else are
refused, so an attachment can never be a page that runs in our origin. An
image is kept without its metadata (camera, time, GPS) but with its
orientation. A file is kept through Django's storage API under a name of its
own, an image with a 320 px wide thumbnail beside it, and served at ``/files/<token>/<name>``: the
token (256 bits) is the credential, as the client's integrator must fetch
it without signing in.
"""

from __future__ import annotations

import io
import mimetypes
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.urls import reverse
from django.utils.translation import gettext_lazy, ngettext_lazy
from PIL import Image, ImageOps, UnidentifiedImageError

from agents import services
from agents.content import Content, scrub
from agents.models import Agent, Attachment, Chat, Message
from agents.services import InvalidState, ServiceError
from config.text import TEXT_LIMIT

THUMB_WIDTH = 320
ORIENTATION = 0x0112  # the one EXIF tag an image keeps (docs/agent-pages.md, "Files")
TEXT_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Kind:
    name: str  # as AGENT_FILE_TYPES names it
    content_type: str
    message_type: str  # photo or document
    extensions: tuple[str, ...]


KINDS = {
    kind.name: kind
    for kind in (
        Kind("png", "image/png", "photo", ("png",)),
        Kind("jpeg", "image/jpeg", "photo", ("jpg", "jpeg")),
        Kind("gif", "image/gif", "photo", ("gif",)),
        Kind("webp", "image/webp", "photo", ("webp",)),
        Kind("pdf", "application/pdf", "document", ("pdf",)),
        Kind("zip", "application/zip", "document", ("zip",)),
        Kind(
            "docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "document",
            ("docx",),
        ),
        Kind(
            "xlsx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "document",
            ("xlsx",),
        ),
        Kind("txt", "text/plain", "document", ("txt", "log")),
        Kind("csv", "text/csv", "document", ("csv",)),
    )
}


class FileRefused(ServiceError):
    code = "invalid_file"


def _extension(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def sniff(head: bytes, name: str) -> Kind | None:
    """What the file is, from its first bytes (and, where the bytes allow
    several kinds, its name's extension)."""
    extension = _extension(name)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return KINDS["png"]
    if head.startswith(b"\xff\xd8\xff"):
        return KINDS["jpeg"]
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return KINDS["gif"]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return KINDS["webp"]
    if head.startswith(b"%PDF-"):
        return KINDS["pdf"]
    if head.startswith(b"PK\x03\x04"):
        return KINDS.get(extension) if extension in ("docx", "xlsx") else KINDS["zip"]
    if _is_plain_text(head):
        return KINDS["csv"] if extension == "csv" else KINDS["txt"]
    return None


def _is_plain_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:  # a character cut at the sniff's end is fine
        if error.start < len(head) - 4:
            return False
        text = head[: error.start].decode("utf-8")
    lowered = text.lstrip().lower()
    # Markup a browser would run is no plain text, whatever its name says.
    return not lowered.startswith(("<!doctype", "<html", "<svg", "<?xml", "<script"))


def clean_name(name: str, kind: Kind) -> str:
    """A file name safe in a URL path and a header: no folders, no controls,
    at most 100 characters, with an extension of its kind."""
    base = unicodedata.normalize("NFKC", name).replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if c.isprintable() and c not in '"<>|?*:%').strip(" .")
    if _extension(base) not in kind.extensions:
        base = f"{base or 'file'}.{kind.extensions[0]}"
    stem, extension = base.rsplit(".", 1)
    return f"{stem[: 95 - len(extension)] or 'file'}.{extension}"


def _thumbnail(data: bytes) -> bytes:
    """The image 320 px wide (never wider than it is), as PNG or JPEG."""
    try:
        with Image.open(io.BytesIO(data)) as opened:
            # Its size is in the header: a small file may decode to gigabytes.
            pixels = opened.width * opened.height
            if pixels > settings.AGENT_IMAGE_MAX_PIXELS:
                megapixels = settings.AGENT_IMAGE_MAX_PIXELS // 1_000_000
                raise FileRefused(
                    ngettext_lazy(
                        "the image is larger than %(limit)d megapixel",
                        "the image is larger than %(limit)d megapixels",
                        "limit",
                    ),
                    limit=megapixels,
                )
            opened.load()
            # Turned as the photo says, as the full image shows it.
            image: Image.Image = ImageOps.exif_transpose(opened)
            if image.width > THUMB_WIDTH:
                height = max(1, round(image.height * THUMB_WIDTH / image.width))
                image = image.resize((THUMB_WIDTH, height))
            keeps_alpha = image.mode in ("RGBA", "LA", "P")
            image = image.convert("RGBA" if keeps_alpha else "RGB")
            out = io.BytesIO()
            image.save(out, format="PNG" if keeps_alpha else "JPEG", quality=85)
            return out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
        raise FileRefused(gettext_lazy("the image could not be read: send another file")) from error


def _check_frames(animation: Image.Image) -> None:
    """Refuse an animation too costly to re-encode: every frame is decoded,
    so a small GIF of thousands of frames costs what a huge image would.
    The frames are counted from their headers, none decoded."""
    frames = getattr(animation, "n_frames", 1)
    if frames > settings.AGENT_IMAGE_MAX_FRAMES:
        raise FileRefused(
            ngettext_lazy(
                "the animation has more than %(limit)d frame",
                "the animation has more than %(limit)d frames",
                "limit",
            ),
            limit=settings.AGENT_IMAGE_MAX_FRAMES,
        )
    if frames * animation.width * animation.height > settings.AGENT_IMAGE_MAX_PIXELS:
        megapixels = settings.AGENT_IMAGE_MAX_PIXELS // 1_000_000
        raise FileRefused(
            ngettext_lazy(
                "the animation is larger than %(limit)d megapixel in all its frames",
                "the animation is larger than %(limit)d megapixels in all its frames",
                "limit",
            ),
            limit=megapixels,
        )


def _without_metadata(data: bytes) -> bytes:
    """The image re-encoded with its pixels, its colour profile and its
    orientation only: a phone's photo carries the camera, the time and the
    GPS position (EXIF, XMP, comments, text chunks), which are the agent's
    and not the client's to see. A JPEG keeps its quantisation (no second
    loss); an animation keeps its frames."""
    try:
        with Image.open(io.BytesIO(data)) as opened:
            # A phone's multi-picture JPEG (MPO) is kept as its first picture.
            image_format = "JPEG" if opened.format == "MPO" else opened.format
            animated = getattr(opened, "is_animated", False) and image_format != "JPEG"
            if animated:
                _check_frames(opened)
            # JPEG's and GIF's comments are dropped; other formats ignore the option.
            options: dict[str, Any] = {
                "icc_profile": opened.info.get("icc_profile"),
                "comment": b"",
            }
            orientation = opened.getexif().get(ORIENTATION)
            if orientation in range(1, 9) and image_format != "GIF":  # no other value turns it
                kept = Image.Exif()
                kept[ORIENTATION] = orientation
                options["exif"] = kept.tobytes()
            if opened.format == "JPEG":
                options |= {"quality": "keep", "subsampling": "keep"}
            elif image_format == "JPEG":
                options["quality"] = 95  # "keep" is for a JPEG Pillow opened as one
            out = io.BytesIO()
            opened.save(out, format=image_format, save_all=animated, **options)
            return out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
        raise FileRefused(gettext_lazy("the image could not be read: send another file")) from error


def store(*, chat: Chat, agent: Agent, upload: UploadedFile) -> Attachment:
    """Check and keep an agent's file; the caller posts the message."""
    size = upload.size or 0
    limit = settings.AGENT_FILE_MAX_BYTES
    if size > limit:
        raise FileRefused(
            gettext_lazy("the file is larger than %(limit)d MB"), limit=limit // (1024 * 1024)
        )
    if size == 0:
        raise FileRefused(gettext_lazy("the file is empty"))
    upload.seek(0)
    data = upload.read()
    kind = sniff(data[:TEXT_SNIFF_BYTES], upload.name or "")
    allowed = [name.lower() for name in settings.AGENT_FILE_TYPES]
    if kind is None or kind.name not in allowed:
        raise FileRefused(
            gettext_lazy("this kind of file cannot be sent; allowed: %(kinds)s"),
            kinds=", ".join(sorted(allowed)),
        )
    name = clean_name(upload.name or "", kind)
    thumb = b""
    if kind.message_type == "photo":
        thumb = _thumbnail(data)  # refuses an image too large before anything else decodes it
        data = _without_metadata(data)
    attachment = Attachment(
        chat=chat, agent=agent, file_name=name, file_size=len(data), content_type=kind.content_type
    )
    attachment.file.save(name, ContentFile(data), save=False)
    if thumb:
        guessed = "png" if thumb.startswith(b"\x89PNG") else "jpg"
        attachment.thumb.save(f"thumb.{guessed}", ContentFile(thumb), save=False)
    attachment.save()
    return attachment


def message_type(attachment: Attachment) -> str:
    return "photo" if attachment.content_type.startswith("image/") else "document"


def url_of(attachment: Attachment, *, thumb: bool = False) -> str:
    path = reverse("file-thumb" if thumb else "file", args=[attachment.token, attachment.file_name])
    return f"{settings.PUBLIC_URL}{path}"


def content_type_of(attachment: Attachment, *, thumb: bool) -> str:
    if thumb:
        return mimetypes.guess_type(attachment.thumb.name or "")[0] or "image/jpeg"
    return attachment.content_type


@transaction.atomic
def send_file(*, chat: Chat, agent: Agent, upload: UploadedFile, text: str = "") -> Message:
    """The agent's file as a photo or document message in their active chat:
    sent like any reply (A3 with file, file_name, file_size, and thumb for an
    image; the widget; delivery states)."""
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    if locked.state != Chat.State.ACTIVE or not locked.agents.filter(pk=agent.pk).exists():
        raise InvalidState(
            gettext_lazy("press Reply before sending a file: the chat must be yours")
        )
    attachment = store(chat=locked, agent=agent, upload=upload)
    payload: dict[str, object] = {
        "file": url_of(attachment),
        "file_name": attachment.file_name,
        "file_size": attachment.file_size,
    }
    if attachment.thumb:
        payload["thumb"] = url_of(attachment, thumb=True)
    content = Content(message_type(attachment), scrub(text).strip()[:TEXT_LIMIT], payload)
    try:
        return services.post_agent_message(chat=locked, agent=agent, content=content)
    except Exception:
        discard(attachment)
        raise


def discard(attachment: Attachment) -> None:
    """Delete the stored files of an attachment whose message was not posted."""
    for field in (attachment.file, attachment.thumb):
        if field:
            field.delete(save=False)


def attachment_for(token: str, name: str) -> Attachment | None:
    """The attachment the URL names (its token and its file name), or None."""
    if not 20 <= len(token) <= 64:
        return None
    return Attachment.objects.filter(token=token, file_name=name).first()
