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

from relay.protocol.untrusted import ascii_decimal
from stores.base import RelayStore, StoreError

SCHEMES = ("memory", "sqlite", "postgresql", "postgres")


def open_store_from_url(url: str) -> RelayStore:
    """Build (not open) the store named by ``url``; raise StoreError if unusable."""
    try:
        scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    except ValueError as exc:  # a broken [IPv6] host, say
        raise StoreError(f"store URL {url!r} is malformed: {exc}") from None
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

        check_postgres_ports(url)
        return PostgresStore(url)
    raise StoreError(
        f"unsupported store URL {url!r}: expected memory://, sqlite:///path/relay.db "
        "or postgresql://user@host:port/db"
    )


def check_postgres_ports(url: str) -> None:
    """Every port of ``url``'s hosts (``h1:5432,h2:5433`` too) is 1..65535,
    or a ``StoreError`` naming the URL: the driver would raise a bare
    ``ValueError`` or ``OverflowError`` only when the store is opened.
    Not checked: that the hosts resolve or listen."""
    netloc = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    for host in netloc.rpartition("@")[2].split(","):
        port = host.rpartition("]")[2] if host.startswith("[") else host
        text = port.rpartition(":")[2] if ":" in port else ""
        number = ascii_decimal(text)
        if text and not (number is not None and 0 < number < 65536):
            raise StoreError(f"Postgres URL {url!r}: a port must be 1..65535, got {text!r}")
