"""What peering needs from the relay it serves: ingestion plus a few reads."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from relay.rules.outcomes import IngestionResult
from relay.scope import GuardReader
from stores.base import ChainRecord, LinkDirection, LinkRecord, LogPage, OutMark, PendingOp
from stores.leases import Lease


class PeeringStore(GuardReader, Protocol):
    # GuardReader: a scoped mirror checks what it pulls (``scope_check``)
    async def get_chain(self, chain_id: str) -> ChainRecord | None: ...
    async def read_chain_log(self, chain_id: str, after: str | None, limit: int) -> LogPage: ...
    async def get_peer_cursor(self, peer_url: str) -> str | None: ...
    async def set_peer_cursor(self, peer_url: str, cursor: str) -> None: ...
    async def log_length(self) -> int: ...
    # the replication ledger (``relay.peering.ledger``)
    async def get_link(
        self, peer_url: str, scope_id: str, direction: LinkDirection
    ) -> LinkRecord | None: ...
    async def put_link(self, record: LinkRecord, operator: bool = False) -> None: ...
    async def list_links(self) -> list[LinkRecord]: ...
    async def put_out_mark(self, mark: OutMark) -> None: ...
    async def list_out_marks(self) -> list[OutMark]: ...
    async def delete_out_mark(
        self, writer: str, peer_url: str, scope_id: str, updated_ms: int | None = None
    ) -> bool: ...
    async def find_buffered(self, cids: Collection[str]) -> dict[str, PendingOp]: ...
    # who pulls from peers (``relay.peering.lead``)
    async def lease(self, name: str) -> Lease: ...


class PeeringHost(Protocol):
    """The relay as peering sees it (``relay.engine.Relay`` satisfies it)."""

    @property
    def store(self) -> PeeringStore: ...

    async def ingest(
        self, tokens: Sequence[object], source: str | None = None
    ) -> list[IngestionResult]: ...


@runtime_checkable
class SigningHost(Protocol):
    """A host that signs with its relay identity key (sender proofs)."""

    def sign_auth_token(self, audience: str, iat: int, exp: int) -> str: ...


@runtime_checkable
class QuietHost(Protocol):
    """A host that tells when none of its commits is still being told to its
    ingest listeners (the out-links' heads follow the store's only then)."""

    def ingest_quiet(self) -> bool: ...
