"""The SQLite store's leases (``stores.leases``): an exclusive ``flock`` on a
file beside the database, one file per lease name. The kernel drops the lock
with the process that held it, however that process ends."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from stores.base import StoreError


def open_lock_file(path: Path, what: str) -> int:
    """A descriptor of ``path`` (created if missing) to ``flock``; a
    ``StoreError`` naming it as ``what`` when it cannot be opened."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"{what} {path}: {exc.strerror or exc}") from exc


def lease_path(database: Path, name: str) -> Path:
    return database.with_name(f"{database.name}-{name}.lease")


class FileLease:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    async def held(self) -> bool:
        if self._fd is not None:
            return True
        fd = open_lock_file(self._path, "lease file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another holder has it (BlockingIOError), or no locks here
            os.close(fd)
            return False
        self._fd = fd
        return True

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the lock
