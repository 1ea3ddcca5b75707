"""What peering needs from the relay it serves: ingestion plus a few reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from relay.rules.outcomes import IngestionResult
from stores.base import ChainRecord, LogPage


class PeeringStore(Protocol):
    async def get_chain(self, chain_id: str) -> ChainRecord | None: ...
    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage: ...
    async def get_peer_cursor(self, peer_url: str) -> str | None: ...
    async def set_peer_cursor(self, peer_url: str, cursor: str) -> None: ...


class PeeringHost(Protocol):
    """The relay as peering sees it (``relay.engine.Relay`` satisfies it)."""

    @property
    def store(self) -> PeeringStore: ...

    async def ingest(
        self, tokens: Sequence[object], source: str | None = None
    ) -> list[IngestionResult]: ...
