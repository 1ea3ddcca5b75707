"""The effective scope: a scope's intent plus its dependency closure, as of
one position of the serving relay's log.

What a scope holds (every rule applied transitively, which for DFOS ends
after one step: identity chains depend on nothing else):
- an intent DID: its identity chain, beacons and artifacts;
- an intent contentId: its content chain;
- a countersignature of any op above (its target is in the scope);
- for a content op: the identity chains of its signer, of the chain's
  creator and of the issuer of the DFOSContentWrite credential it carries;
- for a countersignature: the witness's identity chain;
- for a beacon or artifact: the signer's identity chain (the intent DID).

A closure DID contributes its identity chain only, not its beacons or
content. ``missing`` names closure members this relay should hold and does
not (an identity chain purged since), so a consumer is told, not served a
silently incomplete set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from relay.protocol import ProtocolError, decode_credential_unsafe, decode_jws
from stores.base import FeedEntry, OperationKind

from .model import Scope

_INTENT_DID_KINDS: tuple[OperationKind, ...] = ("identity-op", "beacon", "artifact")
_IDENTITY: tuple[OperationKind, ...] = ("identity-op",)
_CONTENT: tuple[OperationKind, ...] = ("content-op",)
_COUNTERSIGN: tuple[OperationKind, ...] = ("countersign",)

# ops (or chains) per paged read: a step of ~4 ms (500 content ops, decoded
# for their dependencies, took ~9 ms: past the feed's 5 ms slice)
PAGE = 200
FIRST_PAGE = 100

Pause = Callable[[], Awaitable[None]]


class ScopeReader(Protocol):
    async def read_chain_entries(
        self, chain_id: str, kinds: Collection[OperationKind], until_seq: int
    ) -> list[FeedEntry]: ...


class PagedScopeReader(ScopeReader, Protocol):
    async def read_chains_entries_after(
        self,
        chain_ids: Collection[str],
        kinds: Collection[OperationKind],
        after_seq: int,
        until_seq: int,
        limit: int,
    ) -> list[FeedEntry]: ...


@dataclass(slots=True)
class EffectiveScope:
    scope: Scope
    identities: set[str] = field(default_factory=set)  # identity chains in
    owners: set[str] = field(default_factory=set)  # intent DIDs: beacons, artifacts too
    contents: set[str] = field(default_factory=set)  # content chains in
    targets: set[str] = field(default_factory=set)  # ops whose countersignatures are in
    missing: dict[str, set[str]] = field(default_factory=dict)  # class -> ids

    @classmethod
    def of_intent(cls, scope: Scope) -> EffectiveScope:
        return cls(scope, set(scope.dids), set(scope.dids), set(scope.content_ids))

    def contains(self, kind: str, chain_id: str) -> bool:
        if kind == "identity-op":
            return chain_id in self.identities
        if kind == "content-op":
            return chain_id in self.contents
        if kind == "countersign":
            return chain_id in self.targets
        return chain_id in self.owners  # beacon, artifact

    def is_intent(self, kind: str, chain_id: str) -> bool:
        """An op of the intent itself (not a closure identity, not a countersignature)."""
        if kind == "content-op":
            return chain_id in self.contents
        return kind != "countersign" and chain_id in self.owners

    def reads(self) -> Iterator[tuple[str, tuple[OperationKind, ...]]]:
        """Every (chainId, kinds) whose entries make up the scope's items."""
        for did in sorted(self.identities):
            yield did, ("identity-op", "beacon", "artifact") if did in self.owners else _IDENTITY
        for content_id in sorted(self.contents):
            yield content_id, _CONTENT
        for target in sorted(self.targets):
            yield target, _COUNTERSIGN

    def note_missing(self, kind: str, ident: str) -> None:
        self.missing.setdefault(kind, set()).add(ident)

    def missing_json(self) -> dict[str, list[str]]:
        return {kind: sorted(ids) for kind, ids in sorted(self.missing.items()) if ids}


def dependencies(entry: FeedEntry) -> set[str]:
    """The identity DIDs an in-scope ``entry`` needs (its closure step)."""
    if entry.kind == "content-op":
        needed = {entry.author_did}
        creator = (entry.state or {}).get("creator_did")
        if isinstance(creator, str):
            needed.add(creator)
        issuer = _credential_issuer(entry.jws_token)
        if issuer is not None:
            needed.add(issuer)
        return needed
    if entry.kind in ("countersign", "beacon", "artifact"):
        return {entry.author_did}
    return set()


def _credential_issuer(token: str) -> str | None:
    try:
        authorization = decode_jws(token).payload.get("authorization")
        if isinstance(authorization, str):
            return decode_credential_unsafe(authorization).iss
    except ProtocolError:
        pass  # the op verified on ingest; an unreadable credential adds nothing
    return None


async def effective_scope(
    reader: PagedScopeReader,
    scope: Scope,
    until_seq: int,
    collect: list[FeedEntry] | None = None,
) -> EffectiveScope:
    """The effective scope of ``scope`` over the log up to ``until_seq``,
    without pauses (for callers off the relay's loop: tools, benches);
    every entry it holds is appended to ``collect`` when given (the reads
    that find the closure are exactly the scope's items)."""
    found = None if collect is None else collect.extend
    return await effective_scope_in_pages(reader, scope, until_seq, _no_pause, found)


async def _no_pause() -> None:
    return None


async def effective_scope_in_pages(
    reader: PagedScopeReader,
    scope: Scope,
    until_seq: int,
    pause: Pause,
    found: Callable[[list[FeedEntry]], None] | None = None,
    page: int = PAGE,
) -> EffectiveScope:
    """``effective_scope`` read a page of ops (or of chains) at a time, with
    ``pause`` awaited between pages, so a large scope leaves the loop free
    and holds one page of ops at once: the intent's chains, the
    countersignatures of their ops, the identity chains they depend on.
    ``found`` is given each page (the scope's items, as ``collect`` gets)."""
    eff = EffectiveScope.of_intent(scope)
    needed: set[str] = set()
    intent = ((scope.dids, _INTENT_DID_KINDS), (scope.content_ids, _CONTENT))
    for chains, kinds in intent:
        async for entries in _pages(reader, chains, kinds, until_seq, pause, page):
            for entry in entries:
                eff.targets.add(entry.cid)
                needed |= dependencies(entry)
            if found is not None:
                found(entries)
    # a countersignature's chain is its target's CID
    targets = sorted(eff.targets)
    async for entries in _pages(reader, targets, _COUNTERSIGN, until_seq, pause, page):
        for entry in entries:
            needed |= dependencies(entry)
        if found is not None:
            found(entries)
    dids = sorted(needed - eff.identities)
    held: set[str] = set()
    async for entries in _pages(reader, dids, _IDENTITY, until_seq, pause, page):
        held.update(entry.chain_id for entry in entries)
        if found is not None:
            found(entries)
    for did in dids:
        eff.identities.add(did)
        if did not in held:
            eff.note_missing("identity", did)
    return eff


async def _pages(
    reader: PagedScopeReader,
    chain_ids: Collection[str],
    kinds: Collection[OperationKind],
    until_seq: int,
    pause: Pause,
    page: int,
) -> AsyncIterator[list[FeedEntry]]:
    """The ops of ``chain_ids`` up to ``until_seq``, ``page`` chains and ops
    at a time, pausing after each full page. The first read is short: it
    runs before ``pause`` takes a place, in every request at once, and a
    small scope is read in it alone."""
    ids = list(chain_ids)
    limit = min(page, FIRST_PAGE)
    for at in range(0, len(ids), page):
        chunk = ids[at : at + page]
        after = 0
        while True:
            entries = await reader.read_chains_entries_after(chunk, kinds, after, until_seq, limit)
            if entries:
                yield entries
            if len(entries) < limit:
                break
            after, limit = entries[-1].seq, page
            await pause()
        if at + page < len(ids):
            await pause()  # a page of chains read, even with nothing in them, is a step


def bring_forward(eff: EffectiveScope, entries: Iterable[FeedEntry]) -> None:
    """Grow ``eff``, computed over the log up to some seq, by ``entries``,
    the log's entries after that seq in seq order: its identities, targets
    and intent are then ``effective_scope``'s at the last entry's seq
    (``missing`` is not kept up). Exact because the log only grows while its
    epoch stands (a purge starts a new one) and a countersignature is
    sequenced after its target: one pass in seq order sees every target
    before the countersignatures of it."""
    for entry in entries:
        if eff.is_intent(entry.kind, entry.chain_id):
            eff.targets.add(entry.cid)
            eff.identities |= dependencies(entry)
        elif entry.kind == "countersign" and entry.chain_id in eff.targets:
            eff.identities |= dependencies(entry)
