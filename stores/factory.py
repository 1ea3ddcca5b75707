"""The one composition root that picks a store backend from a URL.

- ``memory://``                          in-process (nothing persists)
- ``sqlite:///path/relay.db``            one file (``sqlite:////abs/path`` too;
                                         a relative path after ``sqlite:///``)
- ``postgresql://user@host:port/db``     shared database; ``?schema=name``
  (``postgres://`` is accepted)          selects a schema

The store is returned unopened (the relay's lifespan opens it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from stores.base import RelayStore, StoreError

SCHEMES = ("memory", "sqlite", "postgresql", "postgres")


def open_store_from_url(url: str) -> RelayStore:
    """Build (not open) the store named by ``url``; raise StoreError if unusable."""
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme == "memory":
        from stores.memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from stores.sqlite import SqliteStore

        path = url.split("://", 1)[1]
        if not path.startswith("/") or path == "/":
            raise StoreError(f"SQLite URL {url!r} must look like sqlite:///path/relay.db")
        # sqlite:///relay.db -> relay.db (relative); sqlite:////abs -> /abs
        return SqliteStore(path[1:])
    if scheme in ("postgresql", "postgres"):
        from stores.postgres import PostgresStore

        return PostgresStore(url)
    raise StoreError(
        f"unsupported store URL {url!r}: expected memory://, sqlite:///path/relay.db "
        "or postgresql://user@host:port/db"
    )
