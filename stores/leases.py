"""Named leases: at most one holder at a time among every process sharing a
store, so a duty that must run once per store (following and polling peers)
runs in one process, and moves to another when its holder goes away.

A holder that closes, crashes or loses its connection frees the lease
without a word from it: SQLite holds an advisory lock on a file beside the
database (the kernel drops it with the process), Postgres a session advisory
lock (the server drops it with the connection). A memory store is shared by
no other process, so its leases are only exclusive within it.
"""

from __future__ import annotations

import re
from typing import Protocol, TypeVar

LEASE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


class Lease(Protocol):
    async def held(self) -> bool:
        """Take the lease if it is free; True while this holder has it.
        Asked again and again (about once a second) by whoever wants it:
        a holder that lost it (its connection dropped, say) answers False."""
        ...

    async def release(self) -> None:
        """Give the lease up (it may be taken again by ``held``)."""
        ...


class LeaseStore(Protocol):
    async def lease(self, name: str) -> Lease:
        """A holder for the lease ``name`` (a short lowercase word); it holds
        nothing until ``held`` takes it. ValueError: not such a name."""
        ...


_L = TypeVar("_L", bound=Lease)


class HandedOut:
    """The leases a durable store handed out, released when it closes (a
    closed store holds nothing, whoever forgot to release)."""

    def __init__(self) -> None:
        self._leases: list[Lease] = []

    def keep(self, lease: _L) -> _L:
        self._leases.append(lease)
        return lease

    async def release_all(self) -> None:
        leases, self._leases = self._leases, []
        for lease in leases:
            await lease.release()


def check_lease_name(name: str) -> str:
    if not LEASE_NAME.match(name):
        raise ValueError(f"lease name {name!r}: a lowercase word of at most 32 characters")
    return name


class ProcessLeases:
    """The leases of one in-process store."""

    def __init__(self) -> None:
        self._holders: dict[str, object] = {}

    def lease(self, name: str) -> Lease:
        return _ProcessLease(self._holders, check_lease_name(name))


class _ProcessLease:
    def __init__(self, holders: dict[str, object], name: str) -> None:
        self._holders = holders
        self._name = name

    async def held(self) -> bool:
        return self._holders.setdefault(self._name, self) is self

    async def release(self) -> None:
        if self._holders.get(self._name) is self:
            del self._holders[self._name]
