"""Readiness of a SQLite store's file, as a new reader finds it (``SqliteStore.ping``).

The store's own connections cannot tell that the file was damaged under a
running relay: in WAL mode a connection keeps its page cache across
transactions while the WAL index is unchanged. Measured on a relay's
reader after page 1 was overwritten with random bytes, after every third
page was, and after the file was truncated (to half, to nothing): ``SELECT
1``, ``PRAGMA schema_version`` and a count of ``sqlite_schema`` all still
answered from the cache. So the probe opens a new read-only connection,
which reads from the file (and its WAL, as every later reader will):

- page 1, the header: "file is not a database" when it is overwritten;
- the whole schema (every table's and index's definition is parsed);
- the store's schema version: a file truncated to nothing is a valid empty
  database, without the store's tables;
- the first row of every table: its root page and the leftmost path down.

About a millisecond per probe (17 tables), on a worker thread. Not an
integrity check: a damaged page elsewhere (deep in an index, a later leaf)
is found by the query that reads it, not here. ``PRAGMA quick_check`` would
find it, but it reads the whole file (13-44 ms for a 4 MB store here, so
minutes for tens of GB) inside one read transaction, which keeps WAL
checkpoints from finishing meanwhile: not for a probe every few seconds.
A file busy for a moment (another process checkpointing) is waited for
briefly and is not called damaged; only SQLite's "corrupt" and "not a
database" answers, and a missing schema, are.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from stores.base import StoreDamaged, StoreError

__all__ = ["PROBE_BUSY_TIMEOUT_MS", "probe_file"]

PROBE_BUSY_TIMEOUT_MS = 500  # under /readyz's 2 s bound
_DAMAGE_CODES = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
_TABLES = "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def probe_file(path: Path, read_version: str) -> None:
    """Read ``path`` as a new reader would; ``StoreDamaged`` when SQLite finds
    it damaged or the store's schema missing, ``StoreError`` when it cannot
    be read for another reason (gone, unreadable, busy too long)."""
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the SQLite file: {exc}") from exc
    try:
        db.execute(f"PRAGMA busy_timeout = {PROBE_BUSY_TIMEOUT_MS}")
        _read_heads(db, read_version)
    except sqlite3.Error as exc:
        name = getattr(exc, "sqlite_errorname", "")
        if any(name == code or name.startswith(code + "_") for code in _DAMAGE_CODES):
            raise StoreDamaged(f"the SQLite file is damaged: {exc}") from exc
        if "no such table" in str(exc):  # the store's own tables: its schema is gone
            raise StoreDamaged(f"the SQLite file lost the store's schema: {exc}") from exc
        raise StoreError(f"cannot read the SQLite file: {exc}") from exc
    finally:
        db.close()


def _read_heads(db: sqlite3.Connection, read_version: str) -> None:
    db.execute("BEGIN")  # one snapshot for every read
    try:
        (version,) = db.execute(read_version).fetchone()
        if version is None:
            raise StoreDamaged("the SQLite file lost the store's schema version")
        for (table,) in db.execute(_TABLES).fetchall():
            quoted = table.replace('"', '""')
            db.execute(f'SELECT 1 FROM "{quoted}" LIMIT 1').fetchall()
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
