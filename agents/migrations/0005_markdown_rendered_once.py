# Markdown messages keep their HTML, rendered once (agents/markdown.py); the
# ones stored before get it here.

from django.db import migrations

BATCH = 500


def render_stored_markdown(apps, schema_editor):
    from agents import markdown

    Message = apps.get_model("agents", "Message")
    rows = Message.objects.filter(type="markdown").only("pk", "payload")
    changed = []
    for message in rows.iterator(chunk_size=BATCH):
        payload = message.payload if isinstance(message.payload, dict) else {}
        if "html" in payload or not isinstance(payload.get("content"), str):
            continue
        message.payload = {**payload, "html": str(markdown.render(payload["content"]))}
        changed.append(message)
        if len(changed) == BATCH:
            Message.objects.bulk_update(changed, ["payload"])
            changed = []
    Message.objects.bulk_update(changed, ["payload"])


class Migration(migrations.Migration):

    dependencies = [
        ("agents", "0004_message_sender_name_idempotency_keys"),
    ]

    operations = [
        migrations.RunPython(render_stored_markdown, migrations.RunPython.noop),
    ]
