"""The store interface every backend implements (WEB-RELAY.md "Storage Interface").

Stores are dumb: they never decode a JWS or verify anything. The ingest
pipeline hands them ready columns (records below); uniqueness lives in the
schema. The interface is split into narrow protocols so each consumer types
against the smallest one it needs:

- ``ProofReader``     read side of the proof plane (HTTP routes, peering)
- ``SequencingSession`` one serialized unit of work: batch reads of the state
                      the verifier needs, then one atomic ``commit``
- ``RawOpBuffer``     the store-then-verify buffer of raw tokens
- ``BlobStore``       content-plane blobs keyed by (creator DID, documentCID)
- ``PeerCursorStore`` sync cursors the peers issued
- ``LinkLedgerStore`` the per-link replication ledger (``LinkRecord``)
- ``RelayIdentityStore`` the relay's own persistent DID and key
- ``ForkReader``      one chain's tips and one branch of it, read without
                      the rest of the chain (fork and DID routes)
- ``StatusStore``     what explains an op's status: where it sits in the log,
                      what it waits for, its recent rejection; the buffer's summary
- ``ModerationStore`` bans, purges, dropping buffered ops (``stores.moderation``)
- ``AuditSource``     a consistent read-only snapshot of every row (``stores.audit``)

``RelayStore`` is all of them plus the lifecycle (``open``/``close``).

Invariants a backend must keep:
- ``commit`` is atomic: either every row of the batch lands or none does.
- log positions (``seq``) are assigned in commit order, 1, 2, 3, ..., and
  never change; a reader of ``read_log`` never sees a gap that is filled
  later. ``commit`` returns the head seq it reached.
- ``sequencing()`` sessions are serialized (across processes for shared
  databases) so chain-state read-modify-write cannot race.
- per-op state snapshots make state at any CID an O(1) lookup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from relay.protocol.records import quick_init
from stores.audit import AuditSource
from stores.leases import LeaseStore
from stores.moderation import ModerationStore

OperationKind = Literal["identity-op", "content-op", "beacon", "artifact", "countersign"]
ChainKind = Literal["identity", "content"]

# Dependency keys a pending op can wait for: "op:<cid>", "did:<did>", or
# "policy:<its own cid>" (its dependencies are met, the write policy failed
# on it, and the relay tries it again: nothing else wakes it).
DependencyKey = str


def waits_for_op(cid: str) -> DependencyKey:
    """The key of the ops waiting for ``cid`` to be sequenced."""
    return f"op:{cid}"


def waits_for_policy(cid: str) -> DependencyKey:
    """The key of the buffered op ``cid`` kept through a write-policy error."""
    return f"policy:{cid}"


def dependency_kind(key: DependencyKey) -> str:
    """The ``DEPENDENCY_KINDS`` entry of a non-empty key (its prefix)."""
    return key.partition(":")[0] if key.startswith(("op:", "policy:")) else "did"


class StoreError(Exception):
    """A backend failure the relay cannot work around (I/O, schema, corruption)."""


class StoreDamaged(StoreError):
    """The store's data is damaged (a SQLite file overwritten or truncated):
    readiness says so rather than "unreachable"."""


class UnknownCursorError(StoreError):
    """The ``after`` cursor names no entry of the log being paged."""


@quick_init
@dataclass(frozen=True, slots=True)
class OperationRecord:
    """One sequenced operation of any kind, with its state snapshot.

    ``chain_id`` is the log's chainId (DID for identity ops, beacons and
    artifacts; contentId for content ops; targetCID for countersignatures).
    ``state`` is the chain state *after* this op (identity/content ops only),
    as the protocol's ``to_record()`` dict. ``seq`` is the op's position in
    the global log (1, 2, 3, ...): filled in by reads, 0 on a record that is
    not committed yet.
    """

    cid: str
    jws_token: str
    kind: OperationKind
    chain_id: str
    author_did: str
    parent_cid: str | None
    created_at_ms: int
    state: dict[str, Any] | None = None
    seq: int = 0


@quick_init
@dataclass(frozen=True, slots=True)
class ChainRecord:
    """An identity or content chain: its genesis, head and head state."""

    chain_id: str
    kind: ChainKind
    genesis_cid: str
    head_cid: str
    head_created_at_ms: int
    state: dict[str, Any]


@quick_init
@dataclass(frozen=True, slots=True)
class IdentityKeyRecord:
    """A key that appeared anywhere in an identity's history (historical resolver)."""

    did: str
    key_id: str
    public_key_multibase: str


@dataclass(frozen=True, slots=True)
class BeaconRecord:
    did: str
    cid: str
    jws_token: str
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class CountersignatureRecord:
    target_cid: str
    witness_did: str
    cid: str
    jws_token: str


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of the global (or a chain's) log; ``seq`` is its position in
    the global log: relay-local, gapless, 1-based, in commit order."""

    cid: str
    jws_token: str
    kind: OperationKind
    chain_id: str
    seq: int = 0


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """A log entry with what the changes feed filters and orders on: the
    signer (``author_did``), the op's createdAt and, for chain ops, its
    parent and the chain state after it."""

    seq: int
    cid: str
    jws_token: str
    kind: OperationKind
    chain_id: str
    author_did: str
    created_at_ms: int
    parent_cid: str | None = None
    state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class LogPage:
    entries: tuple[LogEntry, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class BranchPage:
    """A window of one branch of a chain: the ops from genesis to the
    branch's last op along parent links, genesis first. ``length`` counts the
    whole branch; ``entries`` are ``branch[start : start + limit]``."""

    length: int
    start: int
    entries: tuple[FeedEntry, ...]


@dataclass(frozen=True, slots=True)
class PendingOp:
    """A raw token waiting for one missing dependency (``waits_for`` is ""
    while it is buffered but not yet attempted). ``since_ms`` is when it first
    started waiting; a backend keeps the first value while the op stays
    buffered, however often it is parked again (None: not known), except
    that an op kept through a write-policy error starts waiting anew, for
    the policy (``waits_for_policy``; the relay gives up on it after a while).
    ``received_at_ms`` is when it was first buffered (0: unknown, e.g.
    buffered before schema v4). ``replaces``: the sequencing session
    decided this token takes the place of another token buffered under its
    CID (which it keeps as a copy, see ``CommitBatch.copies``); a commit
    leaves a buffered op with another token as it is otherwise. Not stored:
    read back, it is False."""

    cid: str
    jws_token: str
    waits_for: DependencyKey
    since_ms: int | None = None
    received_at_ms: int = 0
    replaces: bool = False


@dataclass(frozen=True, slots=True)
class Rejection:
    """A permanent rejection, keyed by the token's hash (never by CID alone:
    a forged token must not block the genuine one with the same payload).
    ``reason`` is text to the store (``relay.rules.outcomes.recorded_text``:
    the reason and the message)."""

    token_hash: str
    cid: str
    reason: str


@dataclass(frozen=True, slots=True)
class RejectionNote:
    """Why the relay last rejected an op with this CID, kept to explain it
    (``GET /operations/{cid}/status``). ``reason`` is the relay's reason
    enum value; ``token_hash`` says which token was rejected. Bounded: a
    backend keeps only the most recent notes (see ``record_rejection_notes``)."""

    cid: str
    reason: str
    detail: str
    at_ms: int
    token_hash: str = ""


@dataclass(frozen=True, slots=True)
class OpLocation:
    """Where a sequenced op sits: its log position and chain."""

    cid: str
    kind: OperationKind
    chain_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class PendingSummary:
    """The raw-op buffer at a glance.

    ``waiting`` counts ops per dependency kind ("op", "did" or "policy", the prefix of
    ``waits_for``); ``older[kind][i]`` counts those whose ``since_ms`` is at
    or before ``cutoffs_ms[i]`` of the query (cumulative; unknown ``since``
    is never counted older). ``unverified`` counts ops buffered but not yet
    attempted. ``oldest`` is the waiting op with the earliest known ``since``.
    ``copies`` counts the other tokens waiting beside buffered ops.
    """

    waiting: dict[str, int]
    older: dict[str, list[int]]
    unverified: int
    oldest: PendingOp | None
    copies: int = 0


DEPENDENCY_KINDS = ("op", "did", "policy")


@dataclass(frozen=True, slots=True)
class StateQuery:
    """One round of the verifier's batch reads, asked together so a remote
    backend can answer in one round trip.

    Besides what is named, the answer *follows* two links the verifier
    always needs: a content op found among ``cids`` brings its chain, and a
    content chain found brings its creator's identity chain and keys.
    """

    cids: frozenset[str] = frozenset()
    chain_ids: frozenset[str] = frozenset()
    key_dids: frozenset[str] = frozenset()
    beacon_dids: frozenset[str] = frozenset()
    pairs: frozenset[tuple[str, str]] = frozenset()
    token_hashes: frozenset[str] = frozenset()
    count_pending: bool = False  # also count the ops waiting in the buffer
    buffered: frozenset[str] = frozenset()  # CIDs whose buffered token to read
    ban_dids: frozenset[str] = frozenset()  # DIDs whose ban (if any) to read

    def is_empty(self) -> bool:
        return not (
            self.count_pending
            or self.buffered
            or self.ban_dids
            or self.cids
            or self.chain_ids
            or self.key_dids
            or self.beacon_dids
            or self.pairs
            or self.token_hashes
        )


@dataclass(slots=True)
class StateRows:
    """The rows that answer a ``StateQuery`` (absent keys: not stored)."""

    operations: dict[str, OperationRecord] = field(default_factory=dict)
    chains: dict[str, ChainRecord] = field(default_factory=dict)
    identity_keys: dict[str, list[IdentityKeyRecord]] = field(default_factory=dict)
    beacons: dict[str, BeaconRecord] = field(default_factory=dict)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    rejections: dict[str, Rejection] = field(default_factory=dict)
    pending: int | None = None  # set when the query asked to count_pending
    # the token buffered under each of the query's ``buffered`` that has one
    buffered: dict[str, str] = field(default_factory=dict)
    # the token hashes of the copies beside each of those that has any
    copies: dict[str, set[str]] = field(default_factory=dict)
    # the ban's reason for each of the query's ``ban_dids`` that is banned
    bans: dict[str, str] = field(default_factory=dict)


def creator_of(chain: ChainRecord) -> str | None:
    """The creator DID recorded in a content chain's state (None otherwise)."""
    if chain.kind != "content":
        return None
    creator = chain.state.get("creator_did")
    return creator if isinstance(creator, str) else None


@dataclass(slots=True)
class CommitBatch:
    """Everything one sequencing session writes, applied atomically.

    ``operations`` are appended to the global log in list order.
    ``chains`` and ``beacons`` are upserts. ``resolved_cids`` leave the
    pending buffer (sequenced, duplicate or rejected); ``waiting`` are
    (re)recorded with what they now wait for.

    ``copies`` are other tokens of a buffered CID, keyed by (CID, token
    hash): a copy waits beside the op buffered under its CID and goes with
    it, and the session tries the copies when that op is rejected (two
    senders' tokens of one payload, of which only one may verify). A copy
    of a CID that leaves the buffer in this batch is not written.
    ``copies_gone`` leave (tried, or buffered as the CID's op instead).
    """

    operations: list[OperationRecord] = field(default_factory=list)
    chains: dict[str, ChainRecord] = field(default_factory=dict)
    identity_keys: list[IdentityKeyRecord] = field(default_factory=list)
    beacons: dict[str, BeaconRecord] = field(default_factory=dict)
    countersignatures: list[CountersignatureRecord] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    resolved_cids: set[str] = field(default_factory=set)
    waiting: dict[str, PendingOp] = field(default_factory=dict)
    copies: dict[tuple[str, str], PendingOp] = field(default_factory=dict)
    copies_gone: set[tuple[str, str]] = field(default_factory=set)

    def is_empty(self) -> bool:
        return not (
            self.operations
            or self.chains
            or self.identity_keys
            or self.beacons
            or self.countersignatures
            or self.rejections
            or self.resolved_cids
            or self.waiting
            or self.copies
            or self.copies_gone
        )

    def stage_copy(self, token_hash: str, pending: PendingOp) -> None:
        key = (pending.cid, token_hash)
        self.copies_gone.discard(key)
        self.copies[key] = pending

    def drop_copy(self, cid: str, token_hash: str) -> None:
        key = (cid, token_hash)
        self.copies.pop(key, None)
        self.copies_gone.add(key)  # stored or not: deleting nothing is harmless

    def kept_copies(self) -> dict[tuple[str, str], PendingOp]:
        """The copies to write: not those of a CID leaving the buffer."""
        gone = self.resolved_cids - self.waiting.keys()
        return {key: p for key, p in self.copies.items() if key[0] not in gone}


@dataclass(frozen=True, slots=True)
class RelayIdentityRecord:
    """The relay's own DID, signing key seed and profile artifact token."""

    did: str
    key_id: str
    seed: bytes
    genesis_token: str
    profile_token: str


class ProofReader(Protocol):
    async def get_operation(self, cid: str) -> OperationRecord | None: ...
    async def get_chain(self, chain_id: str) -> ChainRecord | None: ...
    async def get_beacon(self, did: str) -> BeaconRecord | None: ...
    async def get_countersignatures(self, target_cid: str) -> list[str]: ...
    async def read_log(self, after: str | None, limit: int) -> LogPage: ...
    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage: ...
    async def log_length(self) -> int: ...
    async def get_identity_keys(
        self, dids: Collection[str]
    ) -> dict[str, list[IdentityKeyRecord]]: ...
    async def sequenced_and_keys(
        self, cids: Collection[str], dids: Collection[str]
    ) -> tuple[set[str], dict[str, list[IdentityKeyRecord]]]:
        """Those of ``cids`` that are in the log, and the key history of each
        of ``dids`` (as ``get_identity_keys``): what a precheck reads, at once."""
        ...


class SequencingSession(Protocol):
    """Batch reads for verification plus one atomic commit, all serialized."""

    async def get_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]: ...
    async def get_chains(self, chain_ids: Collection[str]) -> dict[str, ChainRecord]: ...
    async def get_identity_keys(
        self, dids: Collection[str]
    ) -> dict[str, list[IdentityKeyRecord]]: ...
    async def get_beacons(self, dids: Collection[str]) -> dict[str, BeaconRecord]: ...
    async def get_countersign_pairs(
        self, pairs: Collection[tuple[str, str]]
    ) -> set[tuple[str, str]]: ...
    async def get_rejections(self, token_hashes: Collection[str]) -> dict[str, Rejection]: ...
    async def read_state(self, query: StateQuery) -> StateRows:
        """All reads of ``query`` at once (see ``StateQuery`` for the links followed)."""
        ...

    async def take_waiting(self, keys: Collection[DependencyKey]) -> list[PendingOp]:
        """The buffered ops waiting for ``keys`` and, transitively, those waiting
        for ``waits_for_op(cid)`` of an op taken: a parked chain comes out in one
        call, not one per link. A session takes each op at most once."""
        ...

    async def get_buffered(self, cids: Collection[str]) -> dict[str, str]:
        """The token buffered under each of ``cids`` that has one."""
        ...

    async def take_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        """The copies buffered beside ``cids``, as (token hash, op); read
        only, and a session takes each copy at most once."""
        ...

    async def get_copy_hashes(self, cids: Collection[str]) -> dict[str, set[str]]:
        """The token hashes of the copies buffered beside each of ``cids``
        that has any (what a per-op cap on copies counts)."""
        ...

    async def count_pending(self) -> int:
        """The ops waiting in the buffer, copies included."""
        ...

    async def get_bans(self, dids: Collection[str]) -> dict[str, str]:
        """The ban's reason for each of ``dids`` that is banned (read under
        the session's lock: a ban stored before the session began is seen)."""
        ...

    async def commit(self, batch: CommitBatch) -> int:
        """Apply ``batch`` atomically; returns the log's head seq after it (the
        batch's ops hold the seqs ending there, in list order)."""
        ...


class RawOpBuffer(Protocol):
    async def put_raw_ops(
        self, ops: Sequence[tuple[str, str]], received_at_ms: int = 0
    ) -> set[str]:
        """Buffer (cid, token) pairs before verification; idempotent (an op
        keeps the ``received_at_ms`` it was first buffered with).

        Returns the CIDs that are already sequenced (those are not buffered)."""
        ...

    async def get_unsequenced(
        self, limit: int, after_cid: str | None = None
    ) -> list[PendingOp]: ...
    async def count_unsequenced(self) -> int: ...
    async def get_waiting_for_policy(
        self, limit: int, after_cid: str | None = None
    ) -> list[PendingOp]:
        """The buffered ops kept through a write-policy error (waiting under
        ``waits_for_policy``), by CID after ``after_cid``: whichever process
        kept them. ``since_ms`` is when each began waiting for the policy."""
        ...

    async def get_copies(self, cids: Collection[str]) -> list[tuple[str, PendingOp]]:
        """The copies kept beside ``cids``, as (token hash, copy): a read."""
        ...


class BlobStore(Protocol):
    async def get_blob(self, creator_did: str, document_cid: str) -> bytes | None: ...
    async def put_blob(self, creator_did: str, document_cid: str, data: bytes) -> None: ...


class PeerCursorStore(Protocol):
    async def get_peer_cursor(self, peer_url: str) -> str | None: ...
    async def set_peer_cursor(self, peer_url: str, cursor: str) -> None: ...
    async def list_peer_cursors(self) -> dict[str, str]:
        """Every saved cursor by its key (the replication ledger, as stored)."""
        ...


FULL_SCOPE = "*"  # the scope id of an unscoped link (everything the peer has)
LinkDirection = Literal["in", "out"]
LinkState = Literal["initial", "live", "degraded_poll", "repairing", "paused"]
LINK_STATES: tuple[LinkState, ...] = ("initial", "live", "degraded_poll", "repairing", "paused")
LINK_PENDING_MAX = 64  # pending tokens kept per link; the rest only count in the lag


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """One replication link as its consumer sees it, keyed by (peer_url,
    scope_id, direction). ``direction`` "in": we replicate from the peer;
    "out": we push to it. Tokens are opaque to the store: for an in-link the
    peer's feed tokens (``<epoch>.<seq>``) or log cursors; for an out-link
    seqs of our own log. ``applied_token`` is contiguous: everything up to
    it is applied (in) or delivered or deliberately skipped (out);
    ``pending_tokens`` are received/queued past it (at most
    ``LINK_PENDING_MAX``). ``diagnostics`` is JSON-able (what blocks the
    link, e.g. ``{"missing": {"identity": [...], "operation": [...]}}``).
    ``remote_head``: the peer's head seq as last seen (in-links).
    ``failures`` counts consecutive failures since the last success. Times
    are epoch milliseconds."""

    peer_url: str
    scope_id: str
    direction: LinkDirection
    state: LinkState = "initial"
    received_token: str | None = None
    applied_token: str | None = None
    pending_tokens: tuple[str, ...] = ()
    failures: int = 0
    last_success_ms: int | None = None
    last_failure_ms: int | None = None
    last_error: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    remote_head: int | None = None
    caught_up_ms: int | None = None
    updated_ms: int = 0

    @property
    def key(self) -> tuple[str, str, LinkDirection]:
        return (self.peer_url, self.scope_id, self.direction)


@dataclass(frozen=True, slots=True)
class OutMark:
    """One process's share of an out-link: what ``writer`` (a process's id,
    random at its start) vouches for of its own pushes to the peer. Every
    process on a store pushes the ops it ingested itself, so an out-link is
    delivered up to a seq only when each share says so
    (``relay.peering.link_merge``). ``record.direction`` is "out";
    ``record.updated_ms`` 0 marks a share its writer left behind at a clean
    stop (it still held ops back)."""

    writer: str
    record: LinkRecord


class LinkLedgerStore(Protocol):
    """The consumer-owned replication ledger: one row per link, upserted
    whole (the serving relay keeps no per-consumer state), plus each
    process's share of its out-links (``OutMark``)."""

    async def get_link(
        self, peer_url: str, scope_id: str, direction: LinkDirection
    ) -> LinkRecord | None: ...
    async def put_link(self, record: LinkRecord, operator: bool = False) -> None:
        """Upsert by ``record.key``; ``pending_tokens`` past ``LINK_PENDING_MAX`` are cut.

        Whether a stored link is ``paused`` changes only by an ``operator``
        write (a pause or a resume): another write leaves a paused link
        paused, and does not pause one that is not (it keeps the stored
        state), so that a process that has not heard of an operator's pause
        or resume made in another process cannot undo it."""
        ...

    async def list_links(self) -> list[LinkRecord]:
        """Every link, ordered by (peer_url, scope_id, direction)."""
        ...

    async def delete_link(self, peer_url: str, scope_id: str, direction: LinkDirection) -> bool:
        """Forget a link; False when there was none."""
        ...

    # each process's own share of its out-links (``OutMark``) ----------------
    async def put_out_mark(self, mark: OutMark) -> None:
        """Upsert by (peer_url, scope_id, writer), every field as given
        (``pending_tokens`` cut as for ``put_link``; ``diagnostics`` and
        ``remote_head`` are not kept: an out-link has neither); no pause
        rule: a share's state is its writer's own."""
        ...

    async def list_out_marks(self) -> list[OutMark]:
        """Every share, ordered by (peer_url, scope_id, writer)."""
        ...

    async def delete_out_mark(
        self, writer: str, peer_url: str, scope_id: str, updated_ms: int | None = None
    ) -> bool:
        """Forget one share; with ``updated_ms``, only while it is still the
        share written then (two processes clearing a gone writer's share:
        one of them gets True). False when nothing was deleted."""
        ...


class RelayIdentityStore(Protocol):
    async def get_relay_identity(self) -> RelayIdentityRecord | None: ...
    async def put_relay_identity(self, identity: RelayIdentityRecord) -> None: ...


class StatusStore(Protocol):
    """Reads that explain an op's status, and the bounded rejection notes."""

    async def locate_operations(self, cids: Collection[str]) -> dict[str, OpLocation]: ...
    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]:
        """The buffered (raw or waiting) ops among ``cids``, with ``since_ms``."""
        ...

    async def get_rejection_notes(self, cids: Collection[str]) -> dict[str, RejectionNote]: ...
    async def record_rejection_notes(self, notes: Sequence[RejectionNote], keep: int) -> None:
        """Upsert by CID (the latest note wins, and counts as the most recent),
        then drop the oldest so that at most ``keep`` notes remain."""
        ...

    async def pending_summary(self, cutoffs_ms: Sequence[int]) -> PendingSummary: ...


class FeedStore(Protocol):
    """What the changes feed reads. A snapshot at seq S is every read bounded
    by ``seq <= S``: ops are append-only and never change, so such reads see
    the same rows at any later time, without a long-lived transaction."""

    async def log_length(self) -> int:
        """The head seq (positions are gapless, so the length)."""
        ...

    async def read_seq_range(self, after_seq: int, until_seq: int, limit: int) -> list[FeedEntry]:
        """Entries with ``after_seq < seq <= until_seq`` in seq order, at most ``limit``."""
        ...

    async def read_roots(
        self, until_seq: int, after: tuple[int, str] | None, limit: int
    ) -> list[FeedEntry]:
        """Ops without a parent (chain genesis ops, beacons, artifacts,
        countersignatures) with ``seq <= until_seq``, ordered by (createdAt,
        CID), strictly after the ``after`` key; at most ``limit``."""
        ...

    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]:
        """Every op of ``chain_id`` of one of ``kinds`` with ``seq <= until_seq``,
        in seq order, with parent and state."""
        ...

    async def read_chains_tips(
        self, chain_ids: Collection[str], kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        """``ForkReader.read_chain_tips`` of many chains in one read: the tips
        of each of ``chain_ids``, all in seq order. What a bootstrap reads for
        a page of chains: rows for their tips only, whatever their lengths."""
        ...

    async def get_beacon(self, did: str) -> BeaconRecord | None:
        """The DID's current beacon (what a bootstrap checks its beacons against)."""
        ...

    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]:
        """A page of many chains' entries: the first ``limit`` of their ops
        of one of ``kinds`` with ``after_seq < seq <= until_seq``, in seq
        order, each once (a large scope is read a page at a time, the loop
        free between pages)."""
        ...

    async def get_feed_epoch(self) -> str:
        """The epoch of this log's seq domain; minted on first use."""
        ...

    async def reset_feed_epoch(self) -> str:
        """Mint and persist a new epoch (the seq domain was reset); return it."""
        ...

    async def watch_commits(
        self, on_head: Callable[[int], None], on_listening: Callable[[bool], None]
    ) -> Callable[[], Awaitable[None]] | None:
        """Call ``on_head(head_seq)`` on every commit by any process sharing
        this store, if the backend can push that (Postgres LISTEN/NOTIFY);
        returns the coroutine that stops watching, or None when it cannot.
        ``on_listening(True)`` once it pushes (at once, or later when it could
        not at first and keeps trying; until then commits by others are heard
        of only by polling). A push that is lost (its connection died) calls
        ``on_listening(False)`` and is restored by the store, which then calls
        ``on_head`` with the head as of then (covering the commits made
        meanwhile) and ``on_listening(True)``."""
        ...

    def watch_epoch(self, on_doubt: Callable[[], None]) -> None:
        """Call ``on_doubt()`` whenever the epoch may have changed without this
        process resetting it, before any read or commit of this process can
        see the change (Postgres: it reached a restarted database server)."""
        ...


class ForkReader(Protocol):
    """One chain's fork structure, read without the rest of the chain. Both
    reads see the chain's ops of ``kind`` with ``seq <= until_seq`` only (a
    snapshot, as ``FeedStore``'s): an op is a child only of a parent among
    them, and ops of other kinds or chains are not part of the chain."""

    async def read_chain_tips(
        self, chain_id: str, kind: OperationKind, until_seq: int
    ) -> list[FeedEntry]:
        """The chain's tips (ops no other op names as its parent) in seq
        order; empty for an unknown (or purged) chain."""
        ...

    async def read_branch(
        self,
        chain_id: str,
        kind: OperationKind,
        cid: str,
        until_seq: int,
        after: str | None,
        limit: int,
    ) -> BranchPage | None:
        """The branch that ends at ``cid``, from the op after ``after`` (from
        genesis without it), at most ``limit`` entries; None when ``cid`` is
        not an op of the chain. Raises ``UnknownCursorError`` when ``after``
        is not on the branch. Returns a window, never the whole branch: the
        cost in rows is ``limit``, whatever the chain's length."""
        ...


class SyncStore(Protocol):
    """What reconciliation reads: every op as a (seq, createdAt, CID) item,
    and the ops a peer asks for by CID."""

    async def read_sync_items(self, after_seq: int, limit: int) -> list[tuple[int, int, str]]:
        """``(seq, created_at_ms, cid)`` of entries with ``seq > after_seq``,
        in seq order, at most ``limit``."""
        ...

    async def read_operations(self, cids: Collection[str]) -> dict[str, OperationRecord]:
        """The sequenced ops among ``cids`` (unknown CIDs are absent), with seq."""
        ...


class RelayStore(
    ProofReader,
    RawOpBuffer,
    BlobStore,
    PeerCursorStore,
    LinkLedgerStore,
    RelayIdentityStore,
    FeedStore,
    ForkReader,
    StatusStore,
    SyncStore,
    ModerationStore,
    AuditSource,
    LeaseStore,
    Protocol,
):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> None:
        """Raise StoreError when the backend is unreachable, StoreDamaged when
        it answers but its data is damaged (readiness)."""
        ...

    def sequencing(self) -> AbstractAsyncContextManager[SequencingSession]:
        """Open one serialized unit of work; commit happens via ``commit``."""
        ...
