"""The store's audit part: a consistent, read-only view of every row, for
``dfos-relay verify-store``.

``audit_snapshot()`` opens one snapshot (Postgres: a READ ONLY REPEATABLE
READ transaction on its own connection; SQLite: a read transaction on its
own connection, which WAL keeps at one commit; memory: copies taken with no
await in between). Every read of the snapshot sees the same committed
state, and none of them blocks a writer: ingestion goes on while an audit
runs. Reads page through each table by its key, so memory stays bounded
by one page plus what the auditor keeps.

The snapshot reports rows as stored, *without* relying on the schema's
uniqueness: two rows with one position or one CID are both returned, so the
auditor can name them. Types come from ``stores.base`` under TYPE_CHECKING
only, so ``stores.base`` can import this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stores.base import (
        BeaconRecord,
        ChainRecord,
        CountersignatureRecord,
        IdentityKeyRecord,
        OperationRecord,
        PendingOp,
    )
    from stores.moderation import PurgedOperation

AUDIT_PAGE = 1000  # rows per read while paging a table


class AuditSnapshot(Protocol):
    async def count_operations(self) -> int: ...
    def operations(self) -> AsyncIterator[OperationRecord]:
        """Every op row in (seq, CID) order, ``seq`` filled in, duplicates kept."""
        ...

    def chains(self) -> AsyncIterator[ChainRecord]: ...
    def identity_keys(self) -> AsyncIterator[IdentityKeyRecord]: ...
    def beacons(self) -> AsyncIterator[BeaconRecord]: ...
    def countersignatures(self) -> AsyncIterator[CountersignatureRecord]: ...
    def blob_keys(self) -> AsyncIterator[tuple[str, str]]:
        """(creator DID, documentCID) of every stored blob (not the bytes)."""
        ...

    def raw_ops(self) -> AsyncIterator[PendingOp]: ...
    def raw_copies(self) -> AsyncIterator[tuple[str, PendingOp]]:
        """(token hash as stored, copy) of every copy kept beside a buffered op."""
        ...

    async def purged(self) -> list[PurgedOperation]: ...


class AuditSource(Protocol):
    def audit_snapshot(self) -> AbstractAsyncContextManager[AuditSnapshot]: ...
