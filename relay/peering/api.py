"""What the engine needs from peering: the seam between them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from relay.rules.outcomes import IngestionResult, SequencedOp

from .host import PeeringHost
from .link_view import LinkView


@dataclass(frozen=True, slots=True)
class PeerState:
    """One peer as operators see it (``GET /admin/peers``, ``GET /peers``):
    a configured one, or one learned by discovery (a gossip peer only)."""

    url: str
    behaviours: tuple[str, ...]  # gossip, read-through, sync, live, reconcile
    failures: int  # consecutive, since the last success
    retry_in_s: float  # backed off for this long (0: ready)
    gossip_backlog: int  # ops queued for gossip to it
    gossip_dropped: int  # ops dropped from its full queue (sync repairs them)
    discovered_did: str | None = None  # set for a peer learned by discovery: its DID

    @property
    def configured(self) -> bool:
        return self.discovered_did is None


class PeeringService(Protocol):
    async def start(self, relay: PeeringHost) -> None: ...
    async def stop(self) -> None: ...
    async def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None: ...
    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool: ...
    async def sync_once(self) -> int: ...
    async def sync_peer(self, url: str) -> int:
        """Sync in from one configured peer until caught up; ops newly sequenced."""
        ...

    def peer_states(self) -> list[PeerState]: ...
    def link_views(self) -> list[LinkView]:
        """The replication ledger's links, with their lag (``GET /peers``)."""
        ...

    async def pause(self, url: str, directions: Sequence[str] = ("in", "out")) -> None:
        """Pause a configured peer's links (KeyError: not a configured peer)."""
        ...

    async def resume(self, url: str, directions: Sequence[str] = ("in", "out")) -> None: ...

    # the push side (issue 15): sender resolution, echo suppression, fan-out hops
    async def ingest_push(
        self,
        tokens: Sequence[object],
        sender_did: str | None,
        hop: str | None,
        proof: str | None = None,
    ) -> list[IngestionResult]:
        """Ingest a POST /operations: ``sender_did``, ``hop`` and ``proof``
        are its relay push headers (absent: a client push)."""
        ...

    def note_received(self, source: str, cids: Iterable[str]) -> None: ...
    def sent_us(self, peer_url: str, cid: str) -> bool: ...
    async def know(self, peer_url: str) -> None:
        """Before pushing to ``peer_url``: learn its DID if we can (without
        it, ``push_headers`` has no proof to give)."""
        ...

    def push_headers(self, peer_url: str) -> Mapping[str, str]:
        """The headers of a push to ``peer_url`` (sender DID and its proof)."""
        ...

    def watch_unproven(self, listener: Callable[[str], None]) -> None:
        """``listener(reason)`` for every push naming a sender it did not prove."""
        ...

    def advertised_peers(self) -> list[dict[str, str]]: ...
