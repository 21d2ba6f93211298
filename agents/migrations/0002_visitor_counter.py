from django.db import migrations


def create_counter(apps, schema_editor):  # type: ignore[no-untyped-def]
    Counter = apps.get_model("agents", "Counter")
    Counter.objects.get_or_create(name="visitor_number", defaults={"value": 0})


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [migrations.RunPython(create_counter, migrations.RunPython.noop)]
