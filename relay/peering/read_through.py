"""Read-through (WEB-RELAY.md "Peering": "Read-through applies to identity
chains and content chains only").

On a local miss the relay asks its read-through peers, in configured order,
for the whole chain log (every page, at most ``read_through_max_ops``),
ingests it through the normal pipeline with full verification
(``source`` = that peer) and reports the chain known only if it is now in
the local store. A peer that serves a forged or broken chain therefore
changes nothing the caller can see: the answer stays 404.

A content chain's ops need their signers' identities: ops that come back
waiting for an identity or key make us read through those signers' identity
logs from the same peer, which wakes the buffered content ops.

``identity_log`` reads one identity log from one given peer (a pushing
relay's own identity, to check its sender proof: ``relay.peering.sender_auth``).

Single flight: concurrent misses on one chain share one task (owned here,
cancelled on shutdown); each caller waits at most ``read_through_deadline_s``
and a slow peer keeps no GET waiting past that. The task goes on (to fill
the store) while it gets on, but asks one peer for pages for at most
``read_through_fetch_s``: a peer is then a ``PeerTimeout``, backed off.
At most ``read_through_peer_fetches`` chains are fetched from one peer at
once (more wait as long as a GET would, then are a ``PeerTimeout`` too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Literal

from peer.base import (
    PeerClient,
    PeerError,
    PeerInvalidOperations,
    PeerLogPage,
    PeerResponseTooLarge,
    PeerTimeout,
)
from relay.protocol import ProtocolError, decode_jws
from relay.rules.outcomes import IngestionResult, RejectReason

from .backoff import Backoff
from .config import PeeringConfig
from .host import PeeringHost
from .ledger import LinkLedger
from .tasks import cancel_all

log = logging.getLogger("dfos_relay.peering")

ChainKind = Literal["identity", "content"]
_SIGNER_MISSING = frozenset({RejectReason.MISSING_IDENTITY, RejectReason.MISSING_KEY})


class ReadThrough:
    def __init__(
        self, peer_urls: Sequence[str], client: PeerClient, backoff: Backoff, config: PeeringConfig
    ) -> None:
        self._peers = tuple(peer_urls)
        self._client = client
        self._backoff = backoff
        self._config = config
        self._host: PeeringHost | None = None
        self._inflight: dict[tuple[ChainKind, str], asyncio.Task[bool]] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}  # per peer: chain fetches at once
        self.peer_calls = 0  # chain-log pages requested (observability, tests)
        self.ledger: LinkLedger | None = None  # the peering service shares its own

    def start(self, host: PeeringHost) -> None:
        self._host = host

    async def stop(self) -> None:
        await cancel_all(self._inflight.values(), quiet=True)
        self._inflight.clear()
        self._host = None

    async def read_through(self, kind: ChainKind, chain_id: str) -> bool:
        if not self._peers or self._host is None:
            return False
        key = (kind, chain_id)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._resolve(kind, chain_id), name=f"read-through {key}")
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._forget(key, t))
        try:
            deadline = self._config.read_through_deadline_s
            return await asyncio.wait_for(asyncio.shield(task), deadline)
        except TimeoutError:
            log.warning("read-through of %s %s passed its deadline; answering 404", kind, chain_id)
            return False

    async def identity_log(self, url: str, did: str) -> list[str] | None:
        """``did``'s identity log as ``url`` serves it (a peer that pushed to
        us naming that DID, whatever its configured behaviours), unverified
        and not ingested; None if it has none. Raises ``PeerError``."""
        return await self._fetch_chain(url, "identity", did)

    def _forget(self, key: tuple[ChainKind, str], task: asyncio.Task[bool]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("read-through of %s failed: %r", key, task.exception())

    async def _resolve(self, kind: ChainKind, chain_id: str) -> bool:
        for url in self._peers:
            if not self._backoff.ready(url):  # a failing peer is not asked again yet
                continue
            if self.ledger is not None and self.ledger.paused(url, "in"):
                continue  # an operator paused pulling from it: reads do not pull either
            try:
                found = await self._from_peer(url, kind, chain_id)
            except PeerError as exc:
                self._backoff.failure(url, f"read-through of {kind} {chain_id}", exc)
                continue
            self._backoff.success(url)
            if found:
                return True
        return False

    async def _from_peer(self, url: str, kind: ChainKind, chain_id: str) -> bool:
        assert self._host is not None
        ends = time.monotonic() + self._config.read_through_fetch_s
        tokens = await self._fetch_chain(url, kind, chain_id, ends)
        if tokens is None:
            return False
        results = await self._host.ingest(tokens, source=url)
        if kind == "content":
            for did in _waiting_signers(tokens, results):
                identity = await self._fetch_chain(url, "identity", did, ends)
                if identity:
                    await self._host.ingest(identity, source=url)
        chain = await self._host.store.get_chain(chain_id)
        if chain is None or chain.kind != kind:
            raise PeerInvalidOperations(url, f"served {kind} log {chain_id} does not verify here")
        return True

    async def _fetch_chain(
        self, url: str, kind: ChainKind, chain_id: str, ends: float | None = None
    ) -> list[str] | None:
        """Every page of the peer's chain log, or None if the peer has no such
        chain; no page is asked for after ``ends`` (default: in
        ``read_through_fetch_s``), a ``PeerTimeout``."""
        if ends is None:
            ends = time.monotonic() + self._config.read_through_fetch_s
        async with self._slot(url, kind, chain_id):
            return await self._pages(url, kind, chain_id, ends)

    @contextlib.asynccontextmanager
    async def _slot(self, url: str, kind: ChainKind, chain_id: str) -> AsyncIterator[None]:
        """One of ``read_through_peer_fetches`` fetches from ``url`` at once,
        waited for while a GET may still wait for its answer: a fetch holds a
        connection of the peer client's pool, which serves every peer, and
        clients missing many chains must not have one slow peer hold it all."""
        slots = self._slots.get(url)
        if slots is None:
            slots = self._slots[url] = asyncio.Semaphore(self._config.read_through_peer_fetches)
        try:
            async with asyncio.timeout(self._config.read_through_deadline_s):
                await slots.acquire()
        except TimeoutError:
            busy = self._config.read_through_peer_fetches
            raise PeerTimeout(url, f"read-through of {kind} {chain_id}: {busy} in flight") from None
        try:
            yield
        finally:
            slots.release()

    async def _pages(
        self, url: str, kind: ChainKind, chain_id: str, ends: float
    ) -> list[str] | None:
        tokens: list[str] = []
        after: str | None = None
        while True:
            if time.monotonic() >= ends:
                budget = self._config.read_through_fetch_s
                raise PeerTimeout(url, f"read-through of {kind} {chain_id} passed {budget}s")
            self.peer_calls += 1
            page = await self._page(url, kind, chain_id, after)
            if page is None:
                return None if after is None else tokens
            tokens.extend(e.jws_token for e in page.entries)
            if len(tokens) > self._config.read_through_max_ops:
                raise PeerResponseTooLarge(
                    url, f"{kind} log {chain_id} exceeds {self._config.read_through_max_ops} ops"
                )
            if page.cursor is None or page.cursor == after or not page.entries:
                return tokens
            after = page.cursor

    async def _page(
        self, url: str, kind: ChainKind, chain_id: str, after: str | None
    ) -> PeerLogPage | None:
        limit = self._config.read_through_page_limit
        if kind == "identity":
            return await self._client.get_identity_log(url, chain_id, after, limit)
        return await self._client.get_content_log(url, chain_id, after, limit)


def _waiting_signers(tokens: Sequence[str], results: Sequence[IngestionResult]) -> list[str]:
    """Signer DIDs of ops that wait for an identity or key, in first-seen order."""
    dids: dict[str, None] = {}
    for token, result in zip(tokens, results, strict=True):
        if result.reason not in _SIGNER_MISSING:
            continue
        with contextlib.suppress(ProtocolError):
            did = decode_jws(token).payload.get("did")
            if isinstance(did, str):
                dids[did] = None
    return list(dids)
