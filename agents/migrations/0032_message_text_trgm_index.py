from django.db import migrations

# The history search compares ``UPPER(column) LIKE UPPER('%…%')`` (Django's
# icontains on PostgreSQL) on the messages' text and the clients' name and
# email: a trigram index of each very expression finds the few rows with a
# rare word without reading them all.
SEARCHED = (
    ("message_text_trgm_idx", "agents_message", "text"),
    ("client_name_trgm_idx", "agents_client", "name"),
    ("client_email_trgm_idx", "agents_client", "email"),
)
CREATE = [
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING gin (UPPER({column}) gin_trgm_ops)"
    for name, table, column in SEARCHED
]
DROP = [f"DROP INDEX CONCURRENTLY IF EXISTS {name}" for name, _, _ in SEARCHED]
# The statistics of the indexed expressions, which the planner needs to tell
# a rare word from a common one; until now autovacuum had no reason to gather
# them. ANALYZE does not stop writes.
ANALYZE = "ANALYZE agents_message, agents_client"


def on_postgresql(statements):
    """Run ``statements`` on PostgreSQL only: pg_trgm is PostgreSQL's, and
    elsewhere (SQLite) the search reads the messages as it did before."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    # CONCURRENTLY runs outside a transaction, and keeps the messages
    # writable while the index builds (docs/operations.md, "Upgrades").
    atomic = False

    dependencies = [
        ("agents", "0031_chat_history_index"),
    ]

    operations = [
        migrations.RunPython(
            on_postgresql(["CREATE EXTENSION IF NOT EXISTS pg_trgm", *CREATE, ANALYZE]),
            on_postgresql(DROP),
        ),
    ]
