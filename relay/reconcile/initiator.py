"""The initiating side of reconciliation with one peer.

1. Negentropy rounds over our index (or a createdAt window of it) until
   the exchange ends, learning ``have`` (ours, not theirs) and ``need``
   (theirs, not ours, less the ops waiting in our pending buffer: we hold
   those already, and fetching them again would not make them sequence).
2. Pull: ``need`` is fetched in batches (oldest first, so dependencies
   tend to come first; the peer orders each batch for transfer) and
   ingested through the normal pipeline: every op is verified, the peer
   is trusted with nothing. A scoped run ingests only what the scope holds
   (``relay.scope.guard``); a closure op its batch does not show to be
   needed is judged again once every batch is in (its dependant may come
   in a later one), and what is still outside is left out
   (``report.out_of_scope``).
3. Push: ``have`` is read from our store a thousand at a time and posted
   in transfer order, a hundred a request, less the ops the peer parked
   when an earlier run pushed them (``ParkedAtPeers``): it wakes them itself
   when their dependency lands, and its item set names them until then;
   and less the ops it answered ``new`` to recently (``TakenAtPeers``): an
   honest peer's set holds them by the next run, so naming them as lacking
   again is its word proved false, and when they are many the run fails.

Bounds (hostile peers, draft section 9): rounds, bytes each way, wall
time, ids to fetch and ids to push per run; a reply over our frame limit,
a malformed reply, ids the peer advertised and then would not serve, ops
it served that do not verify, or a push it took none of end the run
with an error that the caller logs and backs off on. A peer that answers
a round or a fetch "busy" (503 or 429 with ``Retry-After``) is no fault:
the request is sent again after the seconds it asked for, up to
``busy_waits`` times a run (``relay.reconcile.patient``); past that the run
fails (a peer that is always busy is backed off like a faulty one). Running out of rounds
or of room for ids cuts the run short (``report.cut_short``): what it
found is still moved, so the next run gets further, and the caller runs it
soon when this one made progress. Fetching stops at the first batch the
peer serves none of, or serves only forgeries of (a peer that floods us
with ids it has not got costs one fetch request, not one per thousand
ids), and pushing at the first batch it takes none of: rejected whole, or
answered as held already, which it said it lacked, unless nothing is left
to push (a peer that claims to lack everything and takes nothing costs one
push).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from peer.base import PeerError, PeerResponseTooLarge, SubmitResult
from peer.sync_http import MAX_FETCH_CIDS, FetchedOperations, HttpSyncClient
from relay.protocol.negentropy import (
    ID_SIZE,
    INFINITY,
    Negentropy,
    NegentropyError,
    NegentropyOptions,
    Storage,
    StorageWindow,
    UnsupportedVersion,
    cid_from_id,
)
from relay.rules.outcomes import IngestionResult, RejectReason, Status
from relay.rules.transfer_order import transfer_order
from relay.scope import Pulled, Scope, ScopeGuard
from stores.base import OperationRecord, PendingOp, StoreError

from .answers import ParkedAtPeers, TakenAtPeers
from .bounds import ReconcileBounds
from .index import FingerprintIndex
from .pacing import run_paced
from .patient import PatientClient
from .scoped import ScopedItems, ScopedItemsStore
from .server import Window

Direction = Literal["pull", "push", "both"]
PUSH_BATCH = 100  # POST /operations takes at most 100
# token characters of ops outside the scope a scoped run holds to judge
# again at its end (closure ops fetched before what needs them); past it,
# they are left out at once
DEFERRED_CHARS = 16 * 1024 * 1024


class ReconcileAborted(Exception):
    """The run was cut off by a bound or by the peer's behaviour."""


class _CutShort(ReconcileAborted):
    """The round bound or a bound on ids to fetch or push passed: what the
    rounds so far found is still moved (a peer with a small frame limit
    needs many rounds for a large difference, a large difference more ids
    than one run holds, and each run then gets further than the last)."""

    def __init__(self, message: str, have: bytes, need: list[bytes]) -> None:
        super().__init__(message)
        self.have, self.need = have, need


@dataclass(slots=True)
class ReconcileReport:
    peer: str
    direction: Direction
    window: Window
    rounds: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    have: int = 0
    need: int = 0
    fetched: int = 0  # ops the peer served us
    sequenced: int = 0  # of those, newly sequenced here
    refused: list[str] = field(default_factory=list)  # advertised, then not served
    waiting: list[str] = field(default_factory=list)  # pulled, waiting for a dependency
    buffered: int = 0  # theirs, not fetched: they wait in our pending buffer already
    pushed: int = 0
    accepted: int = 0  # of those, answered "new" by the peer (its word)
    parked: int = 0  # of those, answered as waiting for a dependency (its word)
    held_back: int = 0  # not pushed: the peer parked them in an earlier run
    # not pushed: named as lacking, though the peer answered "new" for them
    # in an earlier run (recently): its word was false, they are no progress
    taken_before: int = 0
    seconds: float = 0.0
    error: str | None = None
    # the run stopped at a bound on its size (rounds, ids to fetch or push)
    # and nothing else went wrong: the next run goes on from there
    cut_short: bool = False
    scope_id: str | None = None  # a scoped run: over that scope's items only
    out_of_scope: int = 0  # served by the peer, outside the scope: not ingested
    busy: int = 0  # answers of a busy peer (503/429 with Retry-After), waited out or not
    busy_waited_s: float = 0.0  # waiting for them

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def progressed(self) -> bool:
        """It moved ops: sequenced or parked here, or taken by the peer."""
        return bool(self.sequenced or self.waiting or self.accepted)

    def as_dict(self) -> dict[str, object]:
        return {
            "peer": self.peer,
            "direction": self.direction,
            "since": self.window.since,
            "until": None if self.window.until == INFINITY else self.window.until,
            "rounds": self.rounds,
            "bytesSent": self.bytes_sent,
            "bytesReceived": self.bytes_received,
            "have": self.have,
            "need": self.need,
            "fetched": self.fetched,
            "sequenced": self.sequenced,
            "refused": len(self.refused),
            "buffered": self.buffered,
            "pushed": self.pushed,
            "accepted": self.accepted,
            "parked": self.parked,
            "heldBack": self.held_back,
            "takenBefore": self.taken_before,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "cutShort": self.cut_short,
            "scopeId": self.scope_id,
            "outOfScope": self.out_of_scope,
            "busy": self.busy,
            "busyWaitedS": round(self.busy_waited_s, 3),
        }


class ReconcileStore(ScopedItemsStore, Protocol):
    async def read_operations(self, cids: Sequence[str]) -> dict[str, OperationRecord]: ...
    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]: ...


class ReconcileHost(Protocol):
    @property
    def store(self) -> ReconcileStore: ...

    async def ingest(
        self, tokens: Sequence[object], source: str | None = None
    ) -> list[IngestionResult]: ...


async def reconcile(
    host: ReconcileHost,
    index: FingerprintIndex,
    client: HttpSyncClient,
    peer_url: str,
    *,
    direction: Direction = "both",
    window: Window | None = None,
    bounds: ReconcileBounds | None = None,
    scope: Scope | None = None,
    skip_push: Callable[[str], bool] | None = None,
    push_headers: Callable[[], Mapping[str, str]] | None = None,
    parked: ParkedAtPeers | None = None,
    taken: TakenAtPeers | None = None,
    guard: ScopeGuard | None = None,
) -> ReconcileReport:
    """One run against ``peer_url``; failures are in ``report.error``.

    With ``scope``, both sides reconcile that scope's effective items only,
    and what is pulled is ingested only when the scope holds it: ``guard``
    judges it (one of its own when not given).
    ``skip_push(cid)`` true: not pushed (the peer sent it to us: echo
    suppression); ``push_headers()`` go on every push (the sender header and
    its proof, asked for per push: a long run outlives a proof); ``parked``
    remembers what the peer parked, and holds it back from later runs;
    ``taken`` what it answered ``new`` to: named as lacking by a later run, it
    is not pushed, and the run fails when such ids are many."""
    bounds = bounds or ReconcileBounds()
    report = ReconcileReport(peer_url, direction, window or Window())
    started = time.perf_counter()
    patient = PatientClient(
        client, report, waits=bounds.busy_waits, wait_max_s=bounds.busy_wait_max_s,
        deadline_s=bounds.deadline_s,
    )  # fmt: skip
    items = _Items(index, None if scope is None else (ScopedItems(host.store), scope))
    report.scope_id = None if scope is None else scope.scope_id
    try:
        async with asyncio.timeout(bounds.deadline_s):
            ran_out: _CutShort | None = None
            try:
                have, need = await _rounds(items, host.store, patient, report, bounds)
            except _CutShort as cut:
                ran_out, have, need = cut, cut.have, cut.need
            report.have, report.need = len(have) // ID_SIZE, len(need)
            try:
                if direction in ("pull", "both") and need:
                    if scope is not None and guard is None:
                        guard = ScopeGuard(host.store, scope)
                    await _pull(host, patient, report, need, guard)
                if direction in ("push", "both") and have:
                    skip = _Skip(report, skip_push, parked, taken)
                    await _push(host, patient, report, have, skip, push_headers)
                    skip.judge()
            except ReconcileAborted as exc:  # both said: the run was partial too
                raise ReconcileAborted(f"{exc}; {ran_out}" if ran_out else str(exc)) from exc
            if ran_out is not None:
                report.cut_short = True
                raise ran_out
    except TimeoutError:
        report.error = f"deadline of {bounds.deadline_s:g}s passed"
    except ReconcileAborted as exc:
        report.error = str(exc)
    except PeerError as exc:
        report.error = str(exc)
    except StoreError as exc:  # our side (the index could not be read): retried next run
        report.error = f"our store: {exc}"
    finally:
        report.seconds = time.perf_counter() - started
    return report


class _Items:
    """Our side's items: the index, or a scope's effective item set."""

    def __init__(self, index: FingerprintIndex, scoped: tuple[ScopedItems, Scope] | None) -> None:
        self._index = index
        self._scoped = scoped

    @property
    def scope_query(self) -> str | None:
        return None if self._scoped is None else self._scoped[1].query_value()

    async def storage(self, window: Window) -> Storage:
        if self._scoped is None:
            return _storage(await self._index.ready(), window)
        items, scope = self._scoped
        return _storage(await items.storage(scope), window)

    def current(self, window: Window, in_use: Storage) -> Storage:
        """A view of the index as it is now (commits insert into it in place);
        a scope's set never changes, so its view stays ``in_use``."""
        return _storage(self._index.tree, window) if self._scoped is None else in_use


async def _rounds(
    items: _Items,
    store: ReconcileStore,
    client: PatientClient,
    report: ReconcileReport,
    bounds: ReconcileBounds,
) -> tuple[bytes, list[bytes]]:
    window = report.window
    options = NegentropyOptions(frame_size_limit=bounds.frame_limit, random_splits=True)
    negentropy = Negentropy(await items.storage(window), options)
    # ids to push, 32 bytes each: Negentropy names each of ours at most once a run
    have = bytearray()
    need: dict[bytes, None] = {}
    message: bytes | None = negentropy.initiate()
    while message is not None:
        if report.rounds >= bounds.max_rounds:
            raise _CutShort(
                f"no agreement after {bounds.max_rounds} rounds (what they found was moved)",
                bytes(have), list(need),
            )  # fmt: skip
        report.rounds += 1
        report.bytes_sent += len(message)
        reply = await client.negentropy(
            report.peer,
            message,
            since=window.since if window.since else None,
            until=None if window.until == INFINITY else window.until,
            frame_limit=bounds.frame_limit,
            scope=items.scope_query,
        )
        report.bytes_received += len(reply)
        if max(report.bytes_sent, report.bytes_received) > bounds.max_bytes:
            raise ReconcileAborted(f"more than {bounds.max_bytes} bytes in one run")
        # Commits between rounds move indexes: every step reads a fresh view.
        negentropy.storage = await items.storage(window)
        room = bounds.max_have - len(have) // ID_SIZE
        try:
            step = await run_paced(
                negentropy.step_in_steps(reply, room),
                negentropy,
                lambda: items.current(window, negentropy.storage),
            )
        except UnsupportedVersion as exc:
            raise ReconcileAborted(f"peer does not speak negentropy V1 ({exc})") from exc
        except NegentropyError as exc:
            raise ReconcileAborted(f"malformed negentropy reply: {exc}") from exc
        have += b"".join(step.have)
        if step.have_cut and report.direction != "pull":
            raise _CutShort(
                f"more than {bounds.max_have} ids to push in one run"
                " (collecting stopped there: the rest is for the next run)",
                bytes(have), list(need),
            )  # fmt: skip
        found = await _not_buffered(store, step.need, report)
        if not _collect(need, found, bounds.max_need):
            raise _CutShort(
                f"more than {bounds.max_need} ids to fetch in one run"
                " (collecting stopped there: the rest is for the next run)",
                bytes(have), list(need),
            )  # fmt: skip
        message = step.message
    return bytes(have), list(need)


async def _not_buffered(
    store: ReconcileStore, ids: list[bytes], report: ReconcileReport
) -> list[bytes]:
    """``ids`` less those of ops waiting in our pending buffer: the peer's
    index holds its log only, so an op parked here (waiting for a dependency,
    or not verified yet) is named again by every run until it sequences, and
    fetching it again neither helps it along nor leaves room for the rest."""
    kept: list[bytes] = []
    for at in range(0, len(ids), MAX_FETCH_CIDS):
        part = ids[at : at + MAX_FETCH_CIDS]
        cids = [cid_from_id(i) for i in part]
        buffered = await store.find_buffered(cids)
        kept.extend(i for i, cid in zip(part, cids, strict=True) if cid not in buffered)
        report.buffered += len(buffered)
    return kept


def _collect(need: dict[bytes, None], found: list[bytes], cap: int) -> bool:
    """``found`` added to ``need`` up to ``cap`` ids; False when some were left
    out (ids are held as 32 bytes each, made CIDs a batch at a time)."""
    for i in found:
        if len(need) >= cap and i not in need:
            return False
        need[i] = None
    return True


def _storage(tree: Storage, window: Window) -> Storage:
    return tree if window.is_everything else StorageWindow(tree, window.since, window.until)


async def _pull(
    host: ReconcileHost,
    client: PatientClient,
    report: ReconcileReport,
    need: list[bytes],
    guard: ScopeGuard | None = None,
) -> None:
    outside = _Outside(guard)
    try:
        await _pull_all(host, client, report, need, outside)
    finally:
        await outside.settle(host, report)


async def _pull_all(
    host: ReconcileHost,
    client: PatientClient,
    report: ReconcileReport,
    need: list[bytes],
    outside: _Outside,
) -> None:
    for at in range(0, len(need), MAX_FETCH_CIDS):
        cids = [cid_from_id(i) for i in need[at : at + MAX_FETCH_CIDS]]
        unasked = len(need) - at - len(cids)
        more = f" ({unasked} more not asked for)" if unasked else ""
        served, invalid = await _pull_batch(host, client, report, cids, outside)
        if not served:  # ids it has not got: asking for the rest would be no better
            raise ReconcileAborted(
                f"peer advertised {len(report.refused)} ops it then did not serve{more}"
            )
        if invalid == served:  # forgeries: the rest would be no better either
            raise ReconcileAborted(f"peer served {served} ops of which none verify{more}")
    if report.refused:
        raise ReconcileAborted(f"peer advertised {len(report.refused)} ops it then did not serve")


async def _pull_batch(
    host: ReconcileHost,
    client: PatientClient,
    report: ReconcileReport,
    cids: list[str],
    outside: _Outside,
) -> tuple[int, int]:
    """``cids`` fetched and ingested: (ops the peer served, of those rejected
    for good: a bad signature, a CID that is not the payload's...). When it
    served none, all of them are refused, named as missing or not."""
    served, invalid, named = 0, 0, set[str]()
    async for batch, fetched in _fetched(client, report.peer, cids):
        asked = set(batch)
        named.update(c for c in fetched.missing if c in asked)
        report.fetched += len(fetched.tokens)
        served += len(fetched.tokens)
        tokens = await outside.kept(fetched.tokens)
        if tokens:
            results = await _ingest(host, report, tokens, outside)
            invalid += sum(1 for r in results if r.reason is not None and r.reason.is_permanent)
    report.refused.extend(c for c in cids if c in named or not served)
    return served, invalid


async def _ingest(
    host: ReconcileHost, report: ReconcileReport, tokens: Sequence[object], outside: _Outside
) -> list[IngestionResult]:
    results = await host.ingest(tokens, source=report.peer)
    outside.taken(results)
    report.sequenced += sum(1 for r in results if r.status is Status.NEW)
    report.waiting.extend(r.cid for r in results if r.reason is not None and r.reason.is_dependency)
    return results


class _Outside:
    """A scoped run's guard, and the ops its batches left out: judged again
    at the run's end (a closure op may come a batch before its dependant)."""

    def __init__(self, guard: ScopeGuard | None) -> None:
        self._guard = guard
        self._kept: list[Pulled] = []  # the last batch's, until ingest answered
        self._deferred: list[Pulled] = []
        self._held = 0  # token characters deferred
        self._left: list[Pulled] = []  # left out for good

    async def kept(self, tokens: list[str]) -> list[str]:
        if self._guard is None:
            return tokens
        split = await self._guard.split(tokens)
        self._kept = split.kept_ops
        for op in split.outside:
            if self._held + len(op.token) <= DEFERRED_CHARS:
                self._deferred.append(op)
                self._held += len(op.token)
            else:
                self._left.append(op)
        return split.kept

    def taken(self, results: Sequence[IngestionResult]) -> None:
        if self._guard is not None:
            self._guard.settle(self._kept, results)
            self._kept = []

    async def settle(self, host: ReconcileHost, report: ReconcileReport) -> None:
        """Ingest what the scope holds now of the deferred ops; the rest is out."""
        guard = self._guard
        if guard is None:
            return
        back = await guard.recheck(self._deferred) if self._deferred else []
        if back:
            self._kept = back
            await _ingest(host, report, [op.token for op in back], self)
        ingested = {op.cid for op in back}
        self._left += [op for op in self._deferred if op.cid not in ingested]
        self._deferred, self._held = [], 0
        report.out_of_scope += len(self._left)
        guard.left_out(report.peer, self._left)
        self._left = []


async def _fetched(
    client: PatientClient, peer: str, batch: list[str]
) -> AsyncIterator[tuple[list[str], FetchedOperations]]:
    """``batch`` fetched from ``peer``, in halves (and halves of those) while
    an answer is over our response cap: ops of up to 64 KiB each make 1000 of
    them more than any one answer may be."""
    try:
        fetched = await client.fetch_operations(peer, batch)
    except PeerResponseTooLarge:
        if len(batch) == 1:
            raise
        half = len(batch) // 2
        for part in (batch[:half], batch[half:]):
            async for done in _fetched(client, peer, part):
                yield done
        return
    yield batch, fetched


async def _push(
    host: ReconcileHost,
    client: PatientClient,
    report: ReconcileReport,
    have: bytes,
    skip: _Skip,
    headers: Callable[[], Mapping[str, str]] | None,
) -> None:
    """``have`` pushed, read a thousand ops at a time (each thousand in
    transfer order: ``have`` comes in createdAt order within each round, so
    dependencies mostly precede what needs them, and the peer parks the rest
    until they come)."""
    chunk = MAX_FETCH_CIDS * ID_SIZE
    for at in range(0, len(have), chunk):
        ids = have[at : at + chunk]
        cids = [cid_from_id(ids[i : i + ID_SIZE]) for i in range(0, len(ids), ID_SIZE)]
        later = (len(have) - at - len(ids)) // ID_SIZE
        cids = skip.unskipped(cids)
        ops = transfer_order((await host.store.read_operations(cids)).values()) if cids else []
        for part in range(0, len(ops), PUSH_BATCH):
            sent = ops[part : part + PUSH_BATCH]
            batch = [op.jws_token for op in sent]
            results = await client.submit_operations(
                report.peer, batch, headers() if headers else None
            )
            report.pushed += len(batch)
            report.accepted += sum(1 for r in results if r.status == "new")
            skip.answered([op.cid for op in sent], results)
            unpushed = len(ops) - part - len(batch) + later
            took_none = _took_none(results, unpushed)
            if took_none is not None:  # the rest would fare no better
                more = f" ({unpushed} more not pushed)" if unpushed else ""
                raise ReconcileAborted(f"peer {took_none}{more}")


class _Skip:
    """What a run does not push: what the peer sent us (echo suppression),
    what it parked when pushed before and what it said it took before; and
    what it parks or takes now, kept."""

    def __init__(
        self,
        report: ReconcileReport,
        echo: Callable[[str], bool] | None,
        parked: ParkedAtPeers | None,
        taken: TakenAtPeers | None = None,
    ) -> None:
        self._report, self._echo, self._parked, self._taken = report, echo, parked, taken

    def unskipped(self, cids: list[str]) -> list[str]:
        echo, parked, taken, peer = self._echo, self._parked, self._taken, self._report.peer
        if echo is not None:
            cids = [cid for cid in cids if not echo(cid)]
        if taken is not None:
            kept = [cid for cid in cids if not taken.taken(peer, cid)]
            self._report.taken_before += len(cids) - len(kept)
            cids = kept
        if parked is not None:
            kept = [cid for cid in cids if not parked.parked(peer, cid)]
            self._report.held_back += len(cids) - len(kept)
            cids = kept
        return cids

    def judge(self) -> None:
        """The run fails when the peer named as lacking many ops it said it
        took (``TakenAtPeers.lying``): what it says it took is no progress."""
        report = self._report
        if TakenAtPeers.lying(report.taken_before, report.have):
            raise ReconcileAborted(
                f"peer named as lacking {report.taken_before} of {report.have} ops"
                " it answered as new to an earlier push (not pushed again)"
            )

    def answered(self, cids: list[str], results: Sequence[SubmitResult]) -> None:
        """``results[i]`` answers ``cids[i]`` (one result per op, the client checks)."""
        waits = [cid for cid, r in zip(cids, results, strict=True) if _parks(r)]
        self._report.parked += len(waits)
        if self._taken is not None:
            new = (cid for cid, r in zip(cids, results, strict=True) if r.status == "new")
            self._taken.remember(self._report.peer, new)
        if self._parked is None:
            return
        self._parked.remember(self._report.peer, waits)
        taken = (cid for cid, r in zip(cids, results, strict=True) if r.status != "rejected")
        self._parked.forget(self._report.peer, taken)


_WAITS = frozenset(reason.value for reason in RejectReason if reason.is_dependency)


def _took_none(results: Sequence[SubmitResult], unpushed: int) -> str | None:
    """What the peer did with a push that it took none of (nothing new,
    nothing parked), said for the report; None when it took some. Ops it
    answers as held already it said it lacked: an honest peer does so for an
    op that reached it since the rounds (gossip from us, say), which in a
    live mesh is most of a small difference; so a run's last push (nothing
    ``unpushed`` to spare it) answered so is not held against the peer."""
    if not results or any(not (_refused(r) or r.status == "duplicate") for r in results):
        return None
    count = len(results)
    held = sum(1 for r in results if r.status == "duplicate")
    if held and not unpushed:
        return None
    if not held:
        return f"rejected all {count} ops of a push"
    if held == count:
        return f"already held all {count} ops of a push it said it lacked"
    return f"took none of {count} ops of a push ({held} held already, {count - held} rejected)"


def _parks(result: SubmitResult) -> bool:
    """Rejected for a missing dependency: the peer keeps it waiting for that."""
    return result.status == "rejected" and result.reason in _WAITS


def _refused(result: SubmitResult) -> bool:
    """Rejected, and not parked to wait for a dependency (a windowed run may
    push an op without the older one it needs: the peer keeps it for later)."""
    return result.status == "rejected" and result.reason not in _WAITS
