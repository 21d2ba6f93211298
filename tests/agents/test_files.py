"""Files from the reply box: checked by what they are, kept through the
storage API, served at an unguessable URL, and sent as photo / document
messages; a real worker delivers one to a real Chat API integrator."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client as Browser
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from rest_framework.test import APIClient

from agents import attachments, services
from agents.models import Agent, Attachment, Chat, Message
from agents.tokens import issue_token
from channels_api.services import create_chat_api_channel
from tests.channels_api.conftest import Integrator
from tests.delivery.target import Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text
from tests.worker import Worker, wait_for

pytestmark = pytest.mark.django_db

FETCH = {"X-Requested-With": "fetch"}


def png(width: int = 800, height: int = 400) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (40, 85, 216)).save(out, format="PNG")
    return out.getvalue()


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest.fixture(autouse=True)
def _media(settings: Any, tmp_path: Path) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media")},
        },
    }


def my_chat(agent: Agent) -> Chat:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ann")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    return services.accept_chat(chat=chat, agent=agent)


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_an_image_becomes_a_photo_with_a_320px_thumb_at_an_unguessable_url(
    agent: Agent, settings: Any
) -> None:
    chat = my_chat(agent)
    page = page_of(agent)
    upload = SimpleUploadedFile("../../box photo.png", png(), content_type="text/html")

    answer = page.post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)

    assert answer.json() == {"ok": True}
    message = chat.messages.get(author=Message.Author.AGENT)
    attachment = Attachment.objects.get()
    assert message.type == "photo" and attachment.content_type == "image/png"
    assert attachment.file_name == "box photo.png" and len(attachment.token) >= 43
    assert message.payload == {
        "file": f"{settings.PUBLIC_URL}/files/{attachment.token}/box%20photo.png",
        "file_name": "box photo.png",
        "file_size": len(png()),
        "thumb": f"{settings.PUBLIC_URL}/files/{attachment.token}/thumb/box%20photo.png",
    }
    assert default_storage.exists(str(attachment.file.name))  # through the storage API
    served = Browser().get(f"/files/{attachment.token}/box photo.png")  # no sign-in
    assert served.status_code == 200 and body_of(served) == png()
    assert served["Content-Type"] == "image/png"
    assert served["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in served["Content-Security-Policy"]
    thumb = Browser().get(f"/files/{attachment.token}/thumb/box photo.png")
    with Image.open(io.BytesIO(body_of(thumb))) as small:
        assert small.size == (320, 160)


def test_a_pdf_is_a_document_downloaded_not_shown(agent: Agent) -> None:
    chat = my_chat(agent)
    upload = SimpleUploadedFile("invoice.pdf", PDF, content_type="application/pdf")
    page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload, "text": "Your invoice"})

    message = chat.messages.get(author=Message.Author.AGENT)
    assert message.type == "document" and message.text == "Your invoice"
    assert "thumb" not in message.payload
    token = Attachment.objects.get().token
    served = Browser().get(f"/files/{token}/invoice.pdf")
    assert served["Content-Disposition"].startswith("attachment;")
    assert Browser().get(f"/files/{token}/other.pdf").status_code == 404
    assert Browser().get(f"/files/{'x' * 43}/invoice.pdf").status_code == 404


def test_a_file_gone_from_storage_is_a_404_not_a_500(agent: Agent) -> None:
    # Given a photo whose stored objects were removed behind the service's back
    chat = my_chat(agent)
    upload = SimpleUploadedFile("photo.png", png(), content_type="image/png")
    page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload})
    attachment = Attachment.objects.get()
    default_storage.delete(str(attachment.file.name))
    default_storage.delete(str(attachment.thumb.name))

    # When the client's integrator fetches its links
    file = Browser().get(f"/files/{attachment.token}/photo.png")
    thumb = Browser().get(f"/files/{attachment.token}/thumb/photo.png")

    # Then both are "not found", with no traceback
    for answer in (file, thumb):
        assert answer.status_code == 404
        assert "Traceback" not in answer.content.decode()


def camera_photo(image_format: str, orientation: int = 6) -> bytes:
    """A photo as a phone saves it: camera, time and GPS position in its EXIF,
    a comment or a text chunk, and "turn 90° to show" as its orientation
    (MPO: a JPEG with a second picture, as many phones save them)."""
    exif = Image.Exif()
    exif[0x010F], exif[0x0110], exif[0x0132] = "Canon", "EOS 5D", "2026:11:25 10:00:00"
    exif[0x0112] = orientation  # 6: rotate 90° clockwise
    exif[0x8825] = {1: "N", 2: (48.0, 51.0, 24.0), 3: "E", 4: (2.0, 21.0, 3.0)}  # GPSInfo
    out = io.BytesIO()
    image = Image.new("RGB", (400, 200), (40, 85, 216))
    comment = b"Ann's flat, 3rd floor"
    if image_format == "PNG":
        info = PngInfo()
        info.add_text("Location", "48.8566 N, 2.3522 E")
        image.save(out, format="PNG", exif=exif, pnginfo=info)
    elif image_format == "MPO":
        second = Image.new("RGB", (400, 200), (200, 30, 30))
        image.save(out, "MPO", save_all=True, append_images=[second], exif=exif, comment=comment)
    elif image_format == "GIF":
        image.save(out, format="GIF", comment=comment)
    else:
        image.save(out, format="JPEG", exif=exif, comment=comment)
    return out.getvalue()


@pytest.mark.parametrize(
    ("image_format", "name", "served_format", "exif"),
    [
        ("JPEG", "photo.jpg", "JPEG", {0x0112: 6}),
        ("PNG", "photo.png", "PNG", {0x0112: 6}),
        ("MPO", "photo.jpg", "JPEG", {0x0112: 6}),
        ("GIF", "photo.gif", "GIF", {}),
    ],
)
def test_a_photo_reaches_the_client_without_camera_time_or_place_but_upright(
    agent: Agent, image_format: str, name: str, served_format: str, exif: dict[int, int]
) -> None:
    # Given a phone's photo with its metadata
    chat = my_chat(agent)
    upload = SimpleUploadedFile(name, camera_photo(image_format))

    # When the agent sends it and the client fetches it
    page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)
    attachment = Attachment.objects.get()
    served = body_of(Browser().get(f"/files/{attachment.token}/{name}"))

    # Then the picture is the same, turned the same way, and says nothing else
    assert b"Canon" not in served and b"48.8566" not in served and b"3rd floor" not in served
    with Image.open(io.BytesIO(served)) as image:
        assert image.format == served_format and image.size == (400, 200)
        assert dict(image.getexif()) == exif
        assert "comment" not in image.info and "Location" not in image.info
    assert attachment.file_size == len(served)
    # The thumbnail is turned as the photo is shown (upright, 200 by 400), at most 320 px wide
    thumb = body_of(Browser().get(f"/files/{attachment.token}/thumb/{name}"))
    with Image.open(io.BytesIO(thumb)) as image:
        assert image.size == ((200, 400) if exif else (320, 160))


@pytest.mark.parametrize("orientation", [0, 9, 65535])
def test_a_photo_with_an_orientation_that_is_none_is_kept_without_it(
    agent: Agent, orientation: int
) -> None:
    chat = my_chat(agent)
    upload = SimpleUploadedFile("photo.jpg", camera_photo("JPEG", orientation=orientation))

    answer = page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)

    assert answer.status_code < 300
    served = body_of(Browser().get(f"/files/{Attachment.objects.get().token}/photo.jpg"))
    with Image.open(io.BytesIO(served)) as image:
        assert dict(image.getexif()) == {}


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>x</script></svg>', "kind"),
        ("page.html", b"<!DOCTYPE html><script>alert(1)</script>", "kind"),
        ("fake.png", b"<html><script>alert(1)</script></html>", "kind"),
        ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00" + b"\x00" * 100, "kind"),
        ("broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 50, "image"),
        ("empty.txt", b"", "empty"),
    ],
)
def test_what_cannot_be_sent_is_refused_and_nothing_is_kept(
    agent: Agent, name: str, content: bytes, why: str, tmp_path: Path
) -> None:
    chat = my_chat(agent)
    upload = SimpleUploadedFile(name, content)
    answer = page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)

    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert {"kind": "cannot be sent", "image": "could not be read", "empty": "empty"}[
        why
    ] in message
    assert not Attachment.objects.exists() and chat.messages.count() == 1
    media = tmp_path / "media"
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def test_size_and_kinds_are_settings(agent: Agent, settings: Any) -> None:
    chat = my_chat(agent)
    page = page_of(agent)
    settings.AGENT_FILE_MAX_BYTES = 1000
    big = SimpleUploadedFile("big.txt", b"a" * 1001)
    answer = page.post(f"/agent/chats/{chat.pk}/files", {"file": big}, headers=FETCH)
    assert answer.status_code == 400 and "larger than" in answer.json()["error"]["message"]
    settings.AGENT_FILE_MAX_BYTES = 10_000
    settings.AGENT_FILE_TYPES = ["pdf"]
    notes = SimpleUploadedFile("notes.txt", b"plain words")
    answer = page.post(f"/agent/chats/{chat.pk}/files", {"file": notes}, headers=FETCH)
    assert "allowed: pdf" in answer.json()["error"]["message"]
    assert not Attachment.objects.exists()


def test_an_image_of_too_many_pixels_is_refused_before_it_is_decoded(agent: Agent) -> None:
    out = io.BytesIO()
    Image.new("1", (10_000, 6_000)).save(out, format="PNG")  # 60 MP in a few KB
    assert len(out.getvalue()) < 100_000
    page = page_of(agent)
    chat = my_chat(agent)
    bomb = SimpleUploadedFile("wide.png", out.getvalue())

    answer = page.post(f"/agent/chats/{chat.pk}/files", {"file": bomb}, headers=FETCH)

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the image is larger than 50 megapixels"
    assert not Attachment.objects.exists()


def animated_gif(side: int, frames: int) -> bytes:
    """Two alternating frames, so the encoder keeps every one."""
    black, white = (Image.new("L", (side, side), shade) for shade in (0, 255))
    out = io.BytesIO()
    rest = [white if n % 2 else black for n in range(1, frames)]
    black.save(out, format="GIF", save_all=True, append_images=rest, duration=20, loop=0)
    return out.getvalue()


@pytest.mark.parametrize(
    ("side", "frames", "message"),
    [
        # 900 frames of 250 by 250: 56 MP in a few hundred kilobytes
        (250, 900, "the animation is larger than 50 megapixels in all its frames"),
        (1, 1_500, "the animation has more than 1000 frames"),
    ],
)
def test_an_animation_of_too_many_frames_is_refused_before_it_is_re_encoded(
    agent: Agent, side: int, frames: int, message: str
) -> None:
    data = animated_gif(side, frames)
    assert len(data) < 2_000_000
    chat = my_chat(agent)
    upload = SimpleUploadedFile("many.gif", data)

    answer = page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)

    assert answer.status_code == 400 and answer.json()["error"]["message"] == message
    assert not Attachment.objects.exists()


def test_an_animation_within_the_budget_keeps_its_frames(agent: Agent) -> None:
    chat = my_chat(agent)
    upload = SimpleUploadedFile("few.gif", animated_gif(100, 40))

    answer = page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload}, headers=FETCH)

    assert answer.status_code < 300
    served = body_of(Browser().get(f"/files/{Attachment.objects.get().token}/few.gif"))
    with Image.open(io.BytesIO(served)) as image:
        assert getattr(image, "n_frames", 1) == 40


def test_only_my_active_chat_takes_a_file(agent: Agent) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    queued = services.post_client_message(client=client, content=text("hi")).chat
    page = page_of(agent)
    upload = SimpleUploadedFile("a.txt", b"words")
    answer = page.post(f"/agent/chats/{queued.pk}/files", {"file": upload}, headers=FETCH)
    assert answer.status_code == 400 and "press Reply" in answer.json()["error"]["message"]
    stranger = page_of(AgentFactory.create())
    chat = my_chat(agent)
    upload = SimpleUploadedFile("a.txt", b"words")
    assert stranger.post(f"/agent/chats/{chat.pk}/files", {"file": upload}).status_code == 404
    assert not Attachment.objects.exists()


def test_the_agent_api_takes_a_multipart_file(agent: Agent) -> None:
    chat = my_chat(agent)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    upload = SimpleUploadedFile("report.csv", b"a,b\n1,2\n")
    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/files", {"file": upload}, format="multipart")
    assert answer.status_code == 201 and answer.json()["type"] == "document"
    assert Attachment.objects.get().content_type == "text/csv"


def test_sniffing_tells_kinds_by_their_bytes() -> None:
    assert attachments.sniff(png()[:64], "x.jpg") == attachments.KINDS["png"]
    assert attachments.sniff(b"PK\x03\x04rest", "sheet.xlsx") == attachments.KINDS["xlsx"]
    assert attachments.sniff(b"PK\x03\x04rest", "a.zip") == attachments.KINDS["zip"]
    assert attachments.sniff(b"\xef\xbb\xbfhello \xc3", "a.txt") == attachments.KINDS["txt"]
    assert attachments.sniff(b"<?xml version='1.0'?><svg/>", "a.txt") is None
    assert attachments.clean_name("C:\\evil\\..\\x<y>.pdf", attachments.KINDS["pdf"]) == "xy.pdf"
    assert attachments.clean_name("noext", attachments.KINDS["png"]) == "noext.png"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_file_reaches_a_chat_api_integrator_who_can_fetch_it(
    celery_worker: Worker, integrator_server: Target, agent: Agent
) -> None:
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url=integrator_server.url("/a3"), agents=[agent]
    )
    assert Integrator(chat_api).say("send me the photo", sender_id=77).status_code == 200
    chat = Chat.objects.get()
    services.accept_chat(chat=chat, agent=agent)
    upload = SimpleUploadedFile("parcel.png", png(640, 480))

    page_of(agent).post(f"/agent/chats/{chat.pk}/files", {"file": upload, "text": "Here it is"})

    [request] = integrator_server.wait_for(1, timeout=30)
    body = json.loads(request.body)
    message = body["message"]
    assert body["recipient"] == {"id": 77}
    assert message["type"] == "photo" and message["text"] == "Here it is"
    assert (message["file_name"], message["file_size"]) == ("parcel.png", len(png(640, 480)))
    assert message["thumb"].endswith("/thumb/parcel.png")
    path = message["file"].split("://", 1)[1].split("/", 1)[1]
    fetched = Browser().get(f"/{path}")
    assert body_of(fetched) == png(640, 480)
    wait_for(
        lambda: Message.objects.get(type="photo").delivery_status == Message.Delivery.DELIVERED
    )
