"""Store backends for the test suite: one factory per backend name.

The relay suite and the store-contract suite run over every backend named in
``DFOS_TEST_STORES`` (default: all of them).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from stores.base import RelayStore
from stores.memory import MemoryStore

ALL_BACKENDS = ("memory", "sqlite", "postgres")


def selected_backends() -> list[str]:
    raw = os.environ.get("DFOS_TEST_STORES", ",".join(ALL_BACKENDS))
    return [name.strip() for name in raw.split(",") if name.strip()]


@asynccontextmanager
async def make_store(name: str, tmp_path: Path) -> AsyncIterator[RelayStore]:
    """A fresh, empty, *unopened* store of the named backend (cleaned up after)."""
    if name == "memory":
        yield MemoryStore()
        return
    raise ValueError(f"unknown store backend {name!r}")
