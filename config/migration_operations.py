"""Migration operations shared by the apps' migrations."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import connection, migrations

# A migration with ``AddIndexOnline`` runs outside a transaction on
# PostgreSQL, where CONCURRENTLY cannot run in one, and in one elsewhere:
# SQLite changes a table by copying it into a new one, dropping the old one
# and renaming the new one, and outside a transaction the release still
# serving while this one migrates found no table between the two steps
# ("no such table: delivery_endpoint", answered 500: tests/test_upgrade.py).
ATOMIC_UNLESS_POSTGRESQL = connection.vendor != "postgresql"


class AddIndexOnline(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, so a large table stays
    writable while its index builds (docs/operations.md, "Upgrades"); a plain
    CREATE INDEX elsewhere. Its migration needs
    ``atomic = ATOMIC_UNLESS_POSTGRESQL``."""

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            concurrently = AddIndexConcurrently(self.model_name, self.index)
            concurrently.database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            super().database_forwards(app_label, schema_editor, from_state, to_state)
