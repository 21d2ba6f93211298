"""Files in an S3-compatible bucket (docs/operations.md, "Files"): with
FILE_STORAGE_BUCKET set, django-storages keeps what agents send in the bucket,
and the service still serves it at its own unguessable URL. The bucket is a
real S3 API over HTTP on 127.0.0.1 (moto's server), reached through boto3 as
any S3-compatible store would be."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client as Browser
from moto.server import ThreadedMotoServer
from PIL import Image

from agents import services
from agents.models import Agent, Attachment, Message
from tests.agents.test_files import body_of, png
from tests.factories import ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db

BUCKET = "switchboard-files"
KEYS = {"access_key": "test-access-key", "secret_key": "test-secret-key"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3(endpoint).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def s3(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEYS["access_key"],
        aws_secret_access_key=KEYS["secret_key"],
    )


def keys_in_bucket(endpoint: str) -> list[str]:
    listed = s3(endpoint).list_objects_v2(Bucket=BUCKET)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def test_settings_from_the_environment_keep_files_in_the_bucket(
    s3_endpoint: str, tmp_path: Path
) -> None:
    environment = {
        **os.environ,
        "VAR_DIR": str(tmp_path),
        "FILE_STORAGE_BUCKET": BUCKET,
        "FILE_STORAGE_ENDPOINT_URL": s3_endpoint,
        "FILE_STORAGE_REGION": "us-east-1",
        "FILE_STORAGE_ACCESS_KEY": KEYS["access_key"],
        "FILE_STORAGE_SECRET_KEY": KEYS["secret_key"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    probe = (
        "import django, json; django.setup()\n"
        "from django.core.files.base import ContentFile\n"
        "from django.core.files.storage import default_storage as s\n"
        "name = s.save('probe/hello.txt', ContentFile(b'hello from the env'))\n"
        "print(json.dumps([type(s._wrapped).__name__, name, s.open(name).read().decode()]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    kind, name, read = json.loads(run.stdout.strip().splitlines()[-1])
    assert (kind, read) == ("S3Storage", "hello from the env")
    assert name in keys_in_bucket(s3_endpoint)
    assert not (tmp_path / "media").exists()  # nothing on the local disk


def test_an_agents_file_goes_to_the_bucket_and_is_served_at_its_url(
    agent: Agent, s3_endpoint: str, settings: Any
) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                **KEYS,
                "default_acl": "private",
                "querystring_auth": True,
                "file_overwrite": False,
            },
        },
    }
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ann")
    chat = services.post_client_message(client=client, content=text("the label?")).chat
    services.accept_chat(chat=chat, agent=agent)
    page = page_of(agent)
    before = set(keys_in_bucket(s3_endpoint))
    image = png(640, 320)

    answer = page.post(
        f"/agent/chats/{chat.pk}/files",
        {"file": SimpleUploadedFile("label.png", image, content_type="image/png")},
        headers={"X-Requested-With": "fetch"},
    )

    assert answer.json() == {"ok": True}
    attachment = Attachment.objects.get()
    stored = set(keys_in_bucket(s3_endpoint)) - before
    assert stored == {attachment.file.name, attachment.thumb.name}  # the file and its thumb
    kept = s3(s3_endpoint).get_object(Bucket=BUCKET, Key=attachment.file.name)
    assert kept["Body"].read() == image
    message = chat.messages.get(author=Message.Author.AGENT)
    assert message.type == "photo" and message.payload["file_size"] == len(image)
    served = Browser().get(f"/files/{attachment.token}/label.png")  # no sign-in: the token
    assert served.status_code == 200
    assert body_of(served) == image
    thumb = Browser().get(f"/files/{attachment.token}/thumb/label.png")
    assert Image.open(io.BytesIO(body_of(thumb))).size == (320, 160)
