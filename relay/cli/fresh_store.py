"""An SQLite store a command created, removed again when the command failed
without using it.

``dfos-relay reconcile`` opens its store (creating it: ``./dfos-relay.db``
by default) once the peer answers its well-known document, since its first
Negentropy message is made of the store's items. A peer that then fails
would leave behind an empty store (the file and its open mark ``-open``)
holding only the relay identity made for it.

Only the files that did not exist before the store was opened are removed,
and only when no other store holds the open mark (a relay serving that file
meanwhile): the mark's lock is taken exclusively, and held while they go.
Not covered: a process that has connected to the file and not yet taken the
mark (a relay starting on that very path in the same instant); a file
system without ``flock`` (nothing is removed there); a Postgres schema the
command created, which keeps its empty tables.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from stores.sqlite import SqliteStore
from stores.sqlite_open_mark import mark_path


class FreshStore:
    """The files of an SQLite store that does not exist yet."""

    def __init__(self, database: Path) -> None:
        self._database = database
        beside = [database.with_name(database.name + end) for end in ("-wal", "-shm")]
        # SQLite's own files first, the mark last: it is what guards them
        self._new = [p for p in (*beside, database) if not os.path.lexists(p)]
        self._mark = mark_path(database)
        self._mark_is_new = not os.path.lexists(self._mark)

    @classmethod
    def of(cls, store: object) -> FreshStore | None:
        """Call before the store is opened: None unless it is an SQLite file
        that does not exist yet."""
        if isinstance(store, SqliteStore) and not os.path.lexists(store.path):
            return cls(store.path)
        return None

    def remove(self) -> bool:
        """Remove what opening the (now closed) store created; False when it
        is open elsewhere, or that cannot be known, and so is kept."""
        try:
            fd = os.open(self._mark, os.O_RDWR)
        except OSError:  # no mark (no flock here): whether it is open elsewhere is unknown
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another store holds it open (or no locks here)
                return False
            for path in self._new:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            if self._mark_is_new:
                with contextlib.suppress(FileNotFoundError):
                    self._mark.unlink()
            return True
        finally:
            os.close(fd)
