"""``field__any_of=values``: ``IN`` for a set of thousands of values.

On PostgreSQL the values go as one array parameter (``field = ANY(%s)``)
instead of a placeholder each: the connection binds parameters on the
client (config/postgresql), and a statement of thousands of placeholders is
parsed afresh each time (the live hub's access check of 5,000 visitor
streams spent most of its time there). Elsewhere it is Django's ``__in``.
Registered on every field by ``agents``' ``AppConfig.ready()``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.lookups import In
from django.db.models.sql.compiler import SQLCompiler


class AnyOf(In):
    lookup_name = "any_of"

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, list[Any]]:
        values = [
            self.lhs.output_field.get_db_prep_value(value, connection)
            for value in self.rhs
            if value is not None
        ]
        if not values:
            raise EmptyResultSet
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", [*lhs_params, values]
