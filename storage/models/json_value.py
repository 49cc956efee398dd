"""A column type for any JSON value, read back exactly as written on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Dialect, Text
from sqlalchemy.types import TypeDecorator, TypeEngine

from storage import json_codec


class JsonValue(TypeDecorator[Any]):
    """Any JSON value: object, array, string, number, boolean or null (Python None).

    PostgreSQL stores it in a `json` column. SQLite stores the JSON text in a TEXT column: a
    column declared `JSON` there has NUMERIC affinity, which silently turns the text `28107`
    into an integer and `1.0` into `1`, and an integer cannot be parsed back as JSON text.
    Values written under that affinity before migration 0002 are still read (as numbers).
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(Text())
        return dialect.type_descriptor(JSON(none_as_null=False))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if dialect.name == "sqlite":
            return json_codec.dumps(value)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if dialect.name != "sqlite" or value is None or isinstance(value, int | float):
            return value
        return json_codec.loads(value)
