"""Bootstrap items at snapshot seq S: one per retained current item.

Every read is bounded by ``seq <= S``. Ops never change once sequenced, so
this is exactly the relay's state when its log ended at S, however long
the bootstrap takes and whatever is ingested meanwhile. Items come in
(createdAt, CID) order of their root op: a chain by its genesis, a beacon
(only the latest per DID), every artifact and countersignature.

A chain's item reads the chain's tips (``read_chains_tips``, for a page of
roots at once), never its other ops: what a bootstrap holds does not grow
with the length of the chains it shows. A scoped one reads a chain's
genesis and tips, and its standalone ops and countersignatures a page at a
time.

A snapshot hands the event loop back at least every ``SLICE_S``
(``relay.loop_slices``):
neither a memory store's reads nor an SSE send that the socket takes at once
suspend, so without it one bootstrap held the loop for its whole snapshot.
A scoped one pauses per chain as well (most of a scope's chains, one per
countersignature target, send nothing), and its admission reads the scope's
closure in pages with the same pause (``Feed._admit``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Collection
from typing import Any

from relay.feed.filters import FeedFilter
from relay.loop_slices import Slices
from relay.protocol import ContentState, IdentityState
from relay.rules.forks import tips_of
from relay.scope import EffectiveScope
from stores.base import FeedEntry, FeedStore, OperationKind

PAGE = 500
LATEST_BEACONS_KEPT = 512  # DIDs whose latest beacon at S one bootstrap remembers
_BEACONS: tuple[OperationKind, ...] = ("beacon",)
_COUNTERSIGNS: tuple[OperationKind, ...] = ("countersign",)
_CHAIN_KINDS: dict[OperationKind, str] = {"identity-op": "identity", "content-op": "content"}


async def snapshot_items(
    store: FeedStore, snapshot_seq: int, flt: FeedFilter
) -> AsyncIterator[dict[str, Any]]:
    after: tuple[int, str] | None = None
    latest = LatestBeacons(store, snapshot_seq)
    slices = Slices()
    while True:
        roots = await store.read_roots(snapshot_seq, after, PAGE)
        kept = [root for root in roots if flt.matches_entry(root)]
        tips = await _tips_of_chains(store, kept, snapshot_seq)
        for root in kept:
            await slices.pause_when_due()
            item = await _item(store, root, snapshot_seq, latest, tips)
            if item is not None:
                yield item
        if len(roots) < PAGE:
            return
        after = (roots[-1].created_at_ms, roots[-1].cid)


async def scoped_snapshot_items(
    store: FeedStore, snapshot_seq: int, eff: EffectiveScope
) -> AsyncIterator[dict[str, Any]]:
    """The items of an effective scope, closure first: identity chains, then
    content chains, beacons and artifacts, then countersignatures (those of
    a page of targets at a time, in seq order: a scope has a target per op,
    and a read per target cost a bootstrap a query per op of its scope)."""
    latest = LatestBeacons(store, snapshot_seq)
    slices = Slices()
    targets: list[str] = []
    for chain_id, kinds in eff.reads():
        await slices.pause_when_due()  # chains with nothing to send cost time too
        if kinds == _COUNTERSIGNS:
            targets.append(chain_id)
            if len(targets) < PAGE:
                continue
            roots = _standalone_roots(store, targets, kinds, snapshot_seq, slices)
            targets = []
        else:
            roots = _roots_of(store, chain_id, kinds, snapshot_seq, slices)
        async for item in _scoped_items(store, roots, snapshot_seq, eff, latest):
            yield item
    if targets:
        roots = _standalone_roots(store, targets, _COUNTERSIGNS, snapshot_seq, slices)
        async for item in _scoped_items(store, roots, snapshot_seq, eff, latest):
            yield item


async def _scoped_items(
    store: FeedStore,
    roots: AsyncIterator[FeedEntry],
    s: int,
    eff: EffectiveScope,
    latest: LatestBeacons,
) -> AsyncIterator[dict[str, Any]]:
    async for root in roots:
        if not eff.contains(root.kind, root.chain_id):
            continue
        tips = await _tips_of_chains(store, [root], s)
        item = await _item(store, root, s, latest, tips)
        if item is not None:
            yield item


async def _roots_of(
    store: FeedStore,
    chain_id: str,
    kinds: tuple[OperationKind, ...],
    s: int,
    slices: Slices,
) -> AsyncIterator[FeedEntry]:
    """The ops without a parent among ``chain_id``'s ops of ``kinds`` up to
    ``s``, in seq order: a chain's genesis alone (its first op: every other
    op descends from it, so is sequenced after it), then the standalone ops
    (beacons, artifacts), which are all roots. Never the rest of a chain,
    however long."""
    for kind in kinds:
        if kind in _CHAIN_KINDS:
            first = await store.read_chains_entries_after((chain_id,), (kind,), 0, s, 1)
            if first and first[0].parent_cid is None:
                yield first[0]
    standalone = tuple(kind for kind in kinds if kind not in _CHAIN_KINDS)
    if standalone:
        async for entry in _standalone_roots(store, (chain_id,), standalone, s, slices):
            yield entry


async def _standalone_roots(
    store: FeedStore,
    chain_ids: Collection[str],
    kinds: tuple[OperationKind, ...],
    s: int,
    slices: Slices,
) -> AsyncIterator[FeedEntry]:
    """The ops of ``kinds`` (standalone ones: each a root) of ``chain_ids``
    up to ``s``, in seq order, a page at a time."""
    after = 0
    while True:
        page = await store.read_chains_entries_after(chain_ids, kinds, after, s, PAGE)
        for entry in page:
            await slices.pause_when_due()
            yield entry
        if len(page) < PAGE:
            return
        after = page[-1].seq


async def _tips_of_chains(
    store: FeedStore, roots: list[FeedEntry], s: int
) -> dict[str, list[FeedEntry]]:
    """The tips at ``s`` of the chains among ``roots``, by chain: one read per
    kind for a page of chains, which holds their tips and not their ops."""
    tips: dict[str, list[FeedEntry]] = {}
    for kind in _CHAIN_KINDS:
        chains = [root.chain_id for root in roots if root.kind == kind]
        if chains:
            for tip in await store.read_chains_tips(chains, kind, s):
                tips.setdefault(tip.chain_id, []).append(tip)
    return tips


class LatestBeacons:
    """Which beacon of a DID is its latest at snapshot seq S.

    Every beacon a DID ever sent stays in the log, so reading the DID's
    beacons for each of them made a bootstrap quadratic in one DID's
    beacon count. A DID's current beacon, when it is the one asked about,
    is also its latest at S (nothing newer was sequenced after it). Any
    other is settled by one read of the DID's beacons up to S, remembered
    for the DID's later beacons; the memory is bounded (least recently
    used DIDs are read again), so a bootstrap holds O(1) per subscriber."""

    def __init__(self, store: FeedStore, snapshot_seq: int) -> None:
        self._store = store
        self._s = snapshot_seq
        self._known: OrderedDict[str, str | None] = OrderedDict()

    async def is_latest(self, beacon: FeedEntry) -> bool:
        did = beacon.chain_id
        if did not in self._known:
            current = await self._store.get_beacon(did)
            if current is not None and current.cid == beacon.cid:
                return True
            beacons = await self._store.read_chain_entries(did, _BEACONS, self._s)
            self._known[did] = beacons[-1].cid if beacons else None
            if len(self._known) > LATEST_BEACONS_KEPT:
                self._known.popitem(last=False)
        self._known.move_to_end(did)
        return self._known[did] == beacon.cid


async def _item(
    store: FeedStore,
    root: FeedEntry,
    s: int,
    latest: LatestBeacons,
    tips: dict[str, list[FeedEntry]],
) -> dict[str, Any] | None:
    if root.kind in _CHAIN_KINDS:
        return _chain_item(root, tips.get(root.chain_id) or [root])
    if root.kind == "beacon" and not await latest.is_latest(root):
        return None  # superseded by a later beacon of this DID within the snapshot
    return {
        "kind": root.kind,
        "chainId": root.chain_id,
        "cid": root.cid,
        "author": root.author_did,
        "createdAt": root.created_at_ms,
        "jwsToken": root.jws_token,
        "seq": root.seq,
    }


def _chain_item(root: FeedEntry, chain_tips: list[FeedEntry]) -> dict[str, Any]:
    tips = tips_of(chain_tips)  # head-key order: the head is last
    head = tips[-1]
    kind = _CHAIN_KINDS[root.kind]
    state = head.state or {}
    wire_state = (
        IdentityState.from_record(state).to_json()
        if kind == "identity"
        else ContentState.from_record(state).to_json()
    )
    return {
        "kind": kind,
        "chainId": root.chain_id,
        "genesisCID": root.cid,
        "createdAt": root.created_at_ms,
        "headCID": head.cid,
        "tips": [
            {"cid": op.cid, "createdAt": op.created_at_ms, "head": op.cid == head.cid}
            for op in tips
        ],
        "state": wire_state,
        # the chain's last op up to S is a tip: an op's children are sequenced after it
        "seq": max(op.seq for op in tips),
    }
