"""`manage.py backup` and `restore` (config/backup.py, docs/operations.md "Backups").

A backup is taken by the real command while a real web process stores A2
messages, and restored by the real command into a new database (a new
SQLite file on the embedded default, a new PostgreSQL database on
PostgreSQL): every table's count is the backup's, a chat's messages and a
stored file come back as they were.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command

from agents.models import Attachment, Chat, Message
from channels_api.services import create_chat_api_channel
from tests import worker
from tests.databases import NewDatabase, manage
from tests.factories import AgentFactory
from tests.web.server import WebServer


@pytest.fixture(scope="module")
def web(django_db_setup: None) -> Iterator[WebServer]:
    server = WebServer().start()
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_a_backup_taken_under_traffic_restores_into_a_new_database(
    web: WebServer, tmp_path: Path
) -> None:
    made, _ = create_chat_api_channel(
        name="Shop app",
        webhook_url="http://127.0.0.1:9/integrator",
        agents=[AgentFactory.create(is_online=True)],
    )
    url = f"{web.base_url}/chat-api/{made.path_secret}/{made.channel.public_id}"
    with requests.Session() as session:
        for n in range(5):
            answer = session.post(
                url, json={"sender": {"id": "first"}, "message": {"type": "text", "text": f"m{n}"}},
                timeout=30,
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
    chat = Chat.objects.get(client__external_id="first")
    attachment = Attachment.objects.create(
        chat=chat, file_name="invoice.pdf", file_size=9, content_type="application/pdf",
        file=ContentFile(b"%PDF-1.7\n", name="invoice.pdf"),
    )  # fmt: skip

    stop = threading.Event()
    sent: list[int] = []

    def traffic() -> None:
        with requests.Session() as session:
            n = 0
            while not stop.is_set():
                body = {"sender": {"id": f"c{n % 7}"}, "message": {"type": "text", "text": f"t{n}"}}
                answer = session.post(url, json=body, timeout=30)
                sent.append(answer.status_code)
                n += 1

    writer = threading.Thread(target=traffic)
    writer.start()
    try:
        while len(sent) < 5:
            stop.wait(0.05)
        before = Message.objects.count()
        backed_up = manage(
            "backup", str(tmp_path / "backup"),
            database_url=worker.test_database_url(), var_dir=Path(settings.VAR_DIR),
        )  # fmt: skip
        after = Message.objects.count()
        written = len(sent)
        while len(sent) < written + 3:  # and went on writing after it
            stop.wait(0.05)
    finally:
        stop.set()
        writer.join(30)
    assert backed_up.returncode == 0, backed_up.stderr
    assert set(sent) == {200}, sent
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert before <= manifest["counts"]["agents_message"] <= after
    assert manifest["files"] >= 1
    assert Message.objects.count() > manifest["counts"]["agents_message"]  # traffic went on

    target = NewDatabase(tmp_path / "restored", "restored")
    try:
        restored = target.manage("restore", str(tmp_path / "backup"))
        assert restored.returncode == 0, restored.stderr
        assert f"restored {sum(manifest['counts'].values())} rows" in restored.stdout
        for table, count in manifest["counts"].items():
            counted = target.rows(f'SELECT COUNT(*) FROM "{table}"')  # noqa: S608 - the manifest's
            assert counted == [(count,)], table
        first_chat = target.rows(
            "SELECT author, text FROM agents_message WHERE chat_id = ? ORDER BY id", chat.pk
        )
        assert first_chat == list(chat.messages.order_by("id").values_list("author", "text"))
        (name,) = target.rows("SELECT file FROM agents_attachment WHERE id = ?", attachment.pk)[0]
        assert (target.var_dir / "media" / name).read_bytes() == b"%PDF-1.7\n"
        # Restored and migrated: the restored database serves as this release's.
        checked = target.manage("migrate", "--check")
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        target.drop()


@pytest.mark.django_db
def test_restore_refuses_a_database_that_is_not_empty(tmp_path: Path) -> None:
    call_command("backup", str(tmp_path / "b"))
    chats = Chat.objects.count()
    with pytest.raises(CommandError, match=r"already has \d+ tables: restore into a new, empty"):
        call_command("restore", str(tmp_path / "b"))
    assert Chat.objects.count() == chats


@pytest.mark.django_db
def test_restore_refuses_a_backup_of_a_newer_release_and_a_folder_that_is_no_backup(
    tmp_path: Path,
) -> None:
    call_command("backup", str(tmp_path / "b"))
    manifest_file = tmp_path / "b" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["migrations"].append(["agents", "9999_from_the_future"])
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(CommandError, match=r"newer release .*agents\.9999_from_the_future"):
        call_command("restore", str(tmp_path / "b"))

    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match=r"holds no manifest\.json: not a backup"):
        call_command("restore", str(tmp_path / "empty"))


@pytest.mark.django_db
def test_backup_refuses_a_folder_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="is not empty: give a new folder"):
        call_command("backup", str(tmp_path / "b"))
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["keep.txt"]
