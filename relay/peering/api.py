"""What the engine needs from peering: the seam between them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from relay.rules.outcomes import SequencedOp

from .host import PeeringHost


class PeeringService(Protocol):
    async def start(self, relay: PeeringHost) -> None: ...
    async def stop(self) -> None: ...
    async def on_sequenced(self, ops: Sequence[SequencedOp], source: str | None) -> None: ...
    async def read_through(self, kind: Literal["identity", "content"], chain_id: str) -> bool: ...
    async def sync_once(self) -> int: ...
