"""The few places where SQLite and Postgres SQL differ.

Queries are written once with ``?`` placeholders and two templates:
``{IN}`` (membership in a list passed as *one* parameter, so a batch read is
one round trip whatever its size) and the column types of the schema.
Postgres renders ``?`` as ``$1, $2, ...`` and lists as ``= ANY(text[])``;
SQLite keeps ``?`` and passes lists as a JSON array read with ``json_each``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    in_list: str
    bigint: str
    blob: str
    serial_pk: str
    numbered_params: bool
    arrays: bool = False  # bulk writes as one statement over array parameters
    embedded: bool = False  # in process: a read costs no round trip to a server
    # The buffer's pending count is kept in a row by triggers (schema v6),
    # not counted per read: a count visits the heap for every fresh row.
    kept_pending_count: bool = False

    def render(self, template: str) -> str:
        sql = template.format(
            IN=self.in_list, BIGINT=self.bigint, BLOB=self.blob, SERIAL_PK=self.serial_pk
        )
        if not self.numbered_params:
            return sql
        parts = sql.split("?")
        out = [parts[0]]
        for n, part in enumerate(parts[1:], start=1):
            out.append(f"${n}{part}")
        return "".join(out)

    def lst(self, values: Iterable[str]) -> Any:
        """One parameter holding a list of strings, for ``{IN}``."""
        if self.numbered_params:
            return list(values)
        items = list(values)
        try:  # orjson: several times faster on the batch reads and deletes of ingest
            return orjson.dumps(items).decode()
        except TypeError:  # a lone surrogate, which only json can write
            return json.dumps(items)


SQLITE = Dialect(
    name="sqlite",
    in_list="IN (SELECT value FROM json_each(?))",
    bigint="INTEGER",
    blob="BLOB",
    serial_pk="INTEGER PRIMARY KEY",
    numbered_params=False,
    embedded=True,
)

POSTGRES = Dialect(
    name="postgres",
    in_list="= ANY(CAST(? AS text[]))",
    bigint="BIGINT",
    blob="BYTEA",
    serial_pk="BIGSERIAL PRIMARY KEY",
    numbered_params=True,
    arrays=True,
    kept_pending_count=True,
)
