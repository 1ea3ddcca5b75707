"""The store's moderation part: bans, purges and the raw buffer as operators
change them (``/admin/`` routes).

- ``BanRecord``        a DID whose new ops the relay refuses, why, when, by whom
- ``BanChanges``       the bans written and lifted since a change mark: what a
                       worker's cached ban list reads, O(changes), not O(bans)
- ``PurgedOperation``  one op a purge removed, kept as the record of that purge
                       (its log position stays accounted for: ``verify-store``
                       tells a purged position from a gap)
- ``ModerationBatch``  what one moderation session removes and rewrites,
                       applied atomically
- ``ModerationStore``  the reads a purge plan needs, bans, purge records, and
                       ``moderating()``: a session serialized with sequencing

Stores stay dumb here too: which ops a purge removes and which op becomes a
rewound chain's head is decided above the store (``relay.admin.purge``); the
store deletes and writes what the batch names. Types come from
``stores.base`` under TYPE_CHECKING only, so ``stores.base`` can import this
module.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stores.base import ChainRecord, IdentityKeyRecord, OperationKind, OperationRecord


@dataclass(frozen=True, slots=True)
class BanRecord:
    did: str
    reason: str
    banned_at_ms: int
    banned_by: str  # the operator DID that asked for it


@dataclass(frozen=True, slots=True)
class BanChanges:
    """The bans written and lifted after a change mark, as they stand now.

    Every ban and unban moves the store's change mark on; marks follow
    commit order across every writer of the store, so a reader that saw a
    mark has seen every change up to it. ``whole``: ``banned`` holds every
    ban (the first read, or the store's mark went back below the one asked
    after: a database restored, say), so the reader drops what it held."""

    mark: int  # the last change read: the next read asks for what follows it
    banned: list[BanRecord] = field(default_factory=list)  # written (new or replaced)
    lifted: list[str] = field(default_factory=list)  # DIDs no longer banned
    whole: bool = False


@dataclass(frozen=True, slots=True)
class PurgedOperation:
    """One op removed by the purge of ``purged_did`` (which need not be its
    author: a delegate's op in a banned creator's chain goes with the chain)."""

    seq: int
    cid: str
    kind: OperationKind
    chain_id: str
    author_did: str
    purged_did: str
    purged_at_ms: int


@dataclass(slots=True)
class ModerationBatch:
    """Everything one moderation session changes, applied atomically.

    ``operations`` are deleted (with their countersignature rows) and
    recorded as ``PurgedOperation`` under ``purged_did`` at ``at_ms``;
    ``chains_removed`` are deleted and ``chains_rewound`` upserted (new head
    and state); ``dids_removed`` lose their identity keys, beacon row and the
    blobs they created; ``raw_cids`` leave the raw buffer if not sequenced,
    copies and all. Under each CID of ``raw_replaced`` the buffered op
    leaves and the named copy (token hash, token) takes its place, waiting
    for what it waited for; ``raw_copies_gone`` (CID, token hash) leave.
    A batch that removes operations also starts a new changes-feed epoch, as
    the store's seq domain no longer holds what followers were sent, unless
    it is told to ``keep_epoch`` (a middle step of a purge: see below). An op
    named in ``operations`` that is no longer stored is skipped, not recorded.
    """

    purged_did: str = ""
    at_ms: int = 0
    operations: list[OperationRecord] = field(default_factory=list)
    chains_removed: set[str] = field(default_factory=set)
    chains_rewound: list[ChainRecord] = field(default_factory=list)
    dids_removed: set[str] = field(default_factory=set)
    raw_cids: set[str] = field(default_factory=set)
    raw_replaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    raw_copies_gone: set[tuple[str, str]] = field(default_factory=set)
    # a purge in steps: the blobs these DIDs created go (a blob hangs off ops
    # a later step removes, so they go first); the purge of ``purged_did`` is
    # recorded under way (``purge_under_way``), or no longer (``purge_done``)
    blob_creators: set[str] = field(default_factory=set)
    # a step that removes identity ops: the key rows no op left holds go
    # (the whole identity, keys and all, can take many steps)
    keys_removed: set[IdentityKeyRecord] = field(default_factory=set)
    purge_under_way: bool = False
    purge_done: bool = False
    # a middle step of a purge keeps the epoch: its first step told followers
    # to stop trusting what they hold and its last tells them the end, not
    # every step (one 410, and one re-bootstrap, per step for each follower)
    keep_epoch: bool = False

    def is_empty(self) -> bool:
        return not (
            self.operations
            or self.blob_creators
            or self.keys_removed
            or self.purge_under_way
            or self.purge_done
            or self.chains_removed
            or self.chains_rewound
            or self.dids_removed
            or self.raw_cids
            or self.raw_replaced
            or self.raw_copies_gone
        )


class ModerationSession(Protocol):
    """Reads under the session's lock (a purge step reads what it rewinds),
    then one write."""

    async def get_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]: ...
    async def get_chains(self, chain_ids: Collection[str]) -> dict[str, ChainRecord]: ...

    async def apply_moderation(self, batch: ModerationBatch) -> int:
        """Apply ``batch`` atomically and end the session; returns how many raw
        ops left the buffer (a replaced op counts; copies do not)."""
        ...


class BanChangeReader(Protocol):
    """What a worker's cached ban list reads (``relay.admin.bans``)."""

    async def ban_changes(self, after: int) -> BanChanges:
        """The bans written and lifted after the change mark ``after`` (0: every
        ban, ``whole``). When nothing changed, one read of the mark and no ban
        row. Each DID changed since is listed once, as it stands now."""
        ...


class ModerationStore(BanChangeReader, Protocol):
    async def put_ban(self, ban: BanRecord) -> None:
        """Record (or replace) the ban of ``ban.did``."""
        ...

    async def delete_ban(self, did: str) -> bool:
        """Lift the ban of ``did``; False when it was not banned."""
        ...

    async def list_bans(
        self, limit: int | None = None, after: str | None = None
    ) -> list[BanRecord]:
        """Bans ordered by DID: those after ``after`` (a DID, exclusive), at most
        ``limit`` of them (None: every one; the write gate reads only what
        changed, ``ban_changes``)."""
        ...

    async def count_purged(self, dids: Collection[str]) -> dict[str, dict[str, int]]:
        """How many ops the purges of each of ``dids`` removed, by kind (a DID
        with no purge record is absent): one page of bans' worth, not every
        record."""
        ...

    async def list_purged(self, did: str | None = None) -> list[PurgedOperation]:
        """Purge records (of ``did``'s purges, or all), in (seq, cid) order."""
        ...

    async def purges_under_way(self) -> dict[str, int]:
        """The purges a step began and no step finished (a crash may have cut
        them short): purged DID -> the purge's ``at_ms``."""
        ...

    async def operations_signed_by(self, did: str) -> list[OperationRecord]:
        """Every sequenced op whose signer (``author_did``) is ``did``, in seq order."""
        ...

    async def operations_in_chains(self, chain_ids: Collection[str]) -> list[OperationRecord]:
        """Every sequenced op whose log chainId is one of ``chain_ids`` (any kind;
        a CID here finds the countersignatures of that op), in seq order."""
        ...

    def moderating(self) -> AbstractAsyncContextManager[ModerationSession]:
        """A session serialized with sequencing sessions; nothing lands
        unless ``apply_moderation`` is called."""
        ...
