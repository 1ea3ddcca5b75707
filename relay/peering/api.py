"""What the engine needs from peering: the seam between them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from relay.engine import Relay
    from relay.ingest.pipeline import SequencedOp


class PeeringService(Protocol):
    async def start(self, relay: Relay) -> None: ...
    async def stop(self) -> None: ...
    async def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None: ...
    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool: ...
    async def sync_once(self) -> int: ...
