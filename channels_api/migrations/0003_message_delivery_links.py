# A3 deliveries are linked to their messages by a row, not by a parsed
# "message:<pk>" subject; A2's Idempotency-Keys move to the core's table.

import django.db.models.deletion
from django.db import migrations, models

BATCH = 1000


def link_existing_deliveries(apps, schema_editor):
    """One link per existing A3 message delivery, read from its subject once."""
    Delivery = apps.get_model("delivery", "Delivery")
    Message = apps.get_model("agents", "Message")
    MessageDelivery = apps.get_model("channels_api", "MessageDelivery")
    pairs = []
    deliveries = Delivery.objects.filter(
        purpose="chat_api_message", subject__startswith="message:"
    ).values_list("pk", "subject")
    for delivery_id, subject in deliveries.iterator(chunk_size=BATCH):
        pk = subject.partition(":")[2]
        if pk.isdigit():
            pairs.append((delivery_id, int(pk)))
    existing = set()
    message_ids = sorted({message_id for _, message_id in pairs})
    for start in range(0, len(message_ids), BATCH):
        chunk = message_ids[start : start + BATCH]
        existing.update(Message.objects.filter(pk__in=chunk).values_list("pk", flat=True))
    MessageDelivery.objects.bulk_create(
        [
            MessageDelivery(delivery_id=delivery_id, message_id=message_id)
            for delivery_id, message_id in pairs
            if message_id in existing
        ],
        batch_size=BATCH,
    )


def move_idempotency_keys(apps, schema_editor):
    """Keys still remembered keep answering retries after the upgrade."""
    InboundRequest = apps.get_model("channels_api", "InboundRequest")
    IdempotencyKey = apps.get_model("agents", "IdempotencyKey")
    IdempotencyKey.objects.bulk_create(
        [
            IdempotencyKey(scope=f"chat-api:{seen.channel_id}", key=seen.key, created=seen.created)
            for seen in InboundRequest.objects.iterator(chunk_size=BATCH)
        ],
        batch_size=BATCH,
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0004_message_sender_name_idempotency_keys'),
        ('channels_api', '0002_webhook_url_one_check'),
        ('delivery', '0003_line_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('delivery', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='chat_api_message', to='delivery.delivery')),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.message')),
            ],
        ),
        migrations.RunPython(link_existing_deliveries, migrations.RunPython.noop),
        migrations.RunPython(move_idempotency_keys, migrations.RunPython.noop),
        migrations.DeleteModel(
            name='InboundRequest',
        ),
    ]
