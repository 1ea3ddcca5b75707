"""Whether the machine went down while a SQLite store was open.

With ``synchronous=NORMAL`` a commit survives a crash of the process but an
OS crash or a power cut may lose the last ones. Their seqs are then given
again, to other ops, and a feed consumer holding a token past the surviving
head would later resume from it without a gap being named: the feed's epoch
must change. A crash of the process alone loses nothing, so it must not.

The mark is a small file beside the database (``<db>-open``) holding the boot
it was last opened under and whether it is open. Every open store holds a
shared ``flock`` on it; the one that finds no other holder (the first in,
the last out) reads and writes it:
- first in: the mark says open under another boot (or the boot cannot be
  known) -> the machine went down with the store open: commits may be lost.
  It then records "open, this boot" (fsynced) before the store takes writes;
- last out: the database and its WAL are fsynced, then "closed" is recorded.

A mark that cannot be read (cut short by the crash) counts as open under an
unknown boot. Where ``flock`` is not available there is no mark.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from stores.sqlite_lease import open_lock_file

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MARK_BYTES = 256


def mark_path(database: Path) -> Path:
    return database.with_name(f"{database.name}-open")


def current_boot() -> str | None:
    """This boot of the machine (Linux); None where it cannot be known."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


class OpenMark:
    def __init__(self, database: Path) -> None:
        self._database = database
        self._path = mark_path(database)
        self._fd: int | None = None
        self._boot = current_boot()

    def take(self) -> bool:
        """Hold this store's share of the mark. True when the store was open
        when the machine went down (its last commits may be lost); call
        ``record_open`` once that is dealt with, before any write.

        No lock is held exclusively across an await (two stores of one
        process may open the file side by side): two that both find the
        machine went down both say so."""
        fd = open_lock_file(self._path, "open mark")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another open store: it read the mark when it opened
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._fd = fd
            return False
        except OSError:  # no locks on this file system: no mark
            os.close(fd)
            return False
        self._fd = fd
        before = _read(fd)
        fcntl.flock(fd, fcntl.LOCK_SH)
        if before is None or not before.get("open"):
            return False  # never opened with a mark, or closed cleanly
        return self._boot is None or before.get("boot") != self._boot

    def record_open(self) -> None:
        """Record "open under this boot" (durably) unless another store is open."""
        fd = self._fd
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # another store is open (it writes the mark if it is alone)
        else:
            _write(fd, {"boot": self._boot, "open": True})
        # a refused upgrade drops the shared lock on Linux: take it again
        fcntl.flock(fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Let go of the mark; the last store out records a clean close, after
        making every commit durable."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # another store is still open
            if not self._fsync_database():
                return  # the commits' durability is unknown: stays "open"
            _write(fd, {"boot": self._boot, "open": False})
        finally:
            os.close(fd)

    def _fsync_database(self) -> bool:
        for path in (self._database, self._database.with_name(f"{self._database.name}-wal")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError:
                return False
            try:
                os.fsync(fd)
            except OSError:
                return False
            finally:
                os.close(fd)
        return True


def _read(fd: int) -> dict[str, object] | None:
    """The mark, None when empty; unreadable counts as open under no known boot."""
    raw = os.pread(fd, MARK_BYTES, 0)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return {"open": True, "boot": None}
    return value if isinstance(value, dict) else {"open": True, "boot": None}


def _write(fd: int, value: dict[str, object]) -> None:
    # one block, overwritten in place (padding is JSON whitespace): never
    # truncated, so a crash mid-write leaves the old mark or a torn one
    data = json.dumps(value).encode().ljust(MARK_BYTES)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
