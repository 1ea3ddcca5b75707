"""``PeerDirectory``: who each peer is (issue 15, sender header, fan-out,
discovery).

For every peer URL it knows (configured, or learned by discovery) it holds
what the peer's ``/.well-known/dfos-relay`` says: its relay DID and the
``peers`` it advertises ({url, did}). Lookups are synchronous and answer
from the cache; ``resolve(url)`` fetches one document (single-flight per
URL), and the task started by ``start()`` refreshes every peer each
``refresh_s`` and retries the ones not yet resolved sooner. ``reread(url)``
is for callers that must not wait long on a peer (the fan-out forwarder): at
most one read per interval, waited for briefly and within a budget of
waiting per peer, the rest in the background.

A hostile document is bounded: at most ``MAX_ADVERTISED_PEERS`` entries are
read, entries that are not {url: http(s) URL, did?: string} are skipped,
and either is logged once per fetch. Not checked: that a peer really owns
the DID it claims. The DID is used to avoid echoes and to rank peers, never
to trust ops (every op is verified on ingest).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from peer.base import PeerError, normalize_peer_url

from .config import DIRECTORY_REFRESH_S  # re-read every peer's well-known document

log = logging.getLogger("dfos_relay.peering")

DIRECTORY_RETRY_S = 2.0  # ... and the unresolved ones this often
MAX_ADVERTISED_PEERS = 256  # entries read from one peer's ``peers``
MAX_DID_LENGTH = 512
# ``reread`` waits on one peer at most REREAD_WAIT_BUDGET_S of every
# REREAD_WAIT_WINDOW_S: a peer answering just within the caller's wait, over
# and over, costs the caller at most a tenth of its time
REREAD_WAIT_WINDOW_S = 10.0
REREAD_WAIT_BUDGET_S = 1.0


class WellKnownClient(Protocol):
    async def get_well_known(self, peer_url: str) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Advertised:
    """One entry of a well-known ``peers`` list."""

    url: str
    did: str | None

    def as_json(self) -> dict[str, str]:
        return {"url": self.url, "did": self.did} if self.did else {"url": self.url}


def parse_did(value: object) -> str | None:
    if isinstance(value, str) and value.startswith("did:") and len(value) <= MAX_DID_LENGTH:
        return value
    return None


def parse_advertised(peer_url: str, value: object) -> tuple[Advertised, ...]:
    """The ``peers`` field of a peer's well-known document, bounded; bad
    entries are skipped and logged (absent: an older relay, no entries)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        log.warning("peer %s: well-known 'peers' is not an array; ignored", peer_url)
        return ()
    if len(value) > MAX_ADVERTISED_PEERS:
        log.warning(
            "peer %s: well-known advertises %d peers; only the first %d are read",
            peer_url, len(value), MAX_ADVERTISED_PEERS,
        )  # fmt: skip
    out: dict[str, Advertised] = {}
    bad = 0
    for item in value[:MAX_ADVERTISED_PEERS]:
        entry = _entry(item)
        if entry is None:
            bad += 1
        else:
            out.setdefault(entry.url, entry)
    if bad:
        log.warning("peer %s: skipped %d malformed well-known 'peers' entries", peer_url, bad)
    return tuple(out.values())


def _entry(item: object) -> Advertised | None:
    if not isinstance(item, dict) or not isinstance(item.get("url"), str):
        return None
    try:
        url = normalize_peer_url(item["url"])
    except ValueError:
        return None
    did = item.get("did")
    if did is not None and parse_did(did) is None:
        return None
    return Advertised(url, parse_did(did))


class PeerDirectory:
    def __init__(
        self,
        peer_urls: Iterable[str],
        client: object,
        refresh_s: float = DIRECTORY_REFRESH_S,
        retry_s: float = DIRECTORY_RETRY_S,
    ) -> None:
        self._urls: list[str] = list(dict.fromkeys(peer_urls))
        self._client = client
        self._refresh_s = refresh_s
        self._retry_s = retry_s
        self._did: dict[str, str] = {}
        self._url: dict[str, str] = {}
        self._advertised: dict[str, tuple[Advertised, ...]] = {}
        self._inflight: dict[str, asyncio.Task[bool]] = {}
        self._tried: dict[str, float] = {}  # URL -> monotonic time of the last fetch
        self._read: dict[str, float] = {}  # URL -> ... of the last fetch that was read
        self._waited: dict[str, tuple[float, float]] = {}  # URL -> (window start, s waited)
        self._task: asyncio.Task[None] | None = None
        self.on_refreshed: list[Any] = []  # async callables run after each full refresh

    # lookups ----------------------------------------------------------------
    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(self._urls)

    def add(self, url: str, did: str | None = None) -> None:
        """Track one more peer (discovery); ``did`` as advertised, until its
        own document says otherwise."""
        if url not in self._urls:
            self._urls.append(url)
        if did and url not in self._did:
            self._set_did(url, did)

    def did_of(self, url: str) -> str | None:
        return self._did.get(url)

    def url_of(self, did: str) -> str | None:
        return self._url.get(did)

    def peers_of(self, url: str) -> tuple[Advertised, ...] | None:
        """What ``url`` advertises as its peers; ``None`` until fetched."""
        return self._advertised.get(url)

    def unresolved(self) -> list[str]:
        return [url for url in self._urls if url not in self._did]

    # fetching ---------------------------------------------------------------
    async def resolve(self, url: str) -> bool:
        """Fetch ``url``'s well-known document now (one fetch in flight per URL)."""
        return await asyncio.shield(self._fetching(url))

    def _fetching(self, url: str) -> asyncio.Task[bool]:
        task = self._inflight.get(url)
        if task is None:
            task = asyncio.create_task(self._fetch(url), name=f"well-known {url}")
            self._inflight[url] = task
            task.add_done_callback(self._forget_fetch)
        return task

    async def resolve_if_due(self, urls: Iterable[str], wait_s: float | None = None) -> None:
        """Resolve the given URLs that are still unknown, unless one was tried
        less than ``retry_s`` ago: callers on a request path (a push naming a
        DID we cannot place yet) cannot make us fetch more often than that.
        A read still running is not waited for again (it was, by whoever
        started it). With ``wait_s``, wait at most that long: the reads go
        on in the background, so a peer whose document hangs holds one
        request per ``retry_s`` for ``wait_s``, not every request for the
        whole read."""
        now = time.monotonic()
        due = [
            url for url in urls
            if url not in self._did and url not in self._inflight
            and now - self._tried.get(url, -1e18) >= self._retry_s
        ]  # fmt: skip
        if not due:
            return
        if wait_s is None:
            await asyncio.gather(*(self.resolve(url) for url in due))
        else:  # asyncio.wait leaves the reads running at its timeout
            await asyncio.wait([self._fetching(url) for url in due], timeout=wait_s)

    async def reread(self, url: str, since: float, every_s: float, wait_s: float) -> bool:
        """Was ``url``'s cached document read at or after ``since`` (monotonic
        time)? If not, and no read of it was started in the last ``every_s``
        (nor is one still running), read it now, waiting at most ``wait_s``
        and within ``url``'s budget of waiting (``REREAD_WAIT_BUDGET_S`` per
        ``REREAD_WAIT_WINDOW_S``): past that the read goes on in the
        background and fills the cache, and the answer is False. So however
        often it is asked about, a peer that answers slowly costs the caller
        at most ``wait_s`` per read, and one that answers just in time a
        tenth of the caller's time."""
        if self._read.get(url, -1e18) >= since:
            return True
        now = time.monotonic()
        if url in self._inflight or now - self._tried.get(url, -1e18) < every_s:
            return False
        start, waited = self._waited.get(url, (now, 0.0))
        if now - start >= REREAD_WAIT_WINDOW_S:
            start, waited = now, 0.0
        wait = min(wait_s, REREAD_WAIT_BUDGET_S - waited)
        task = self._fetching(url)
        if wait > 0:
            with contextlib.suppress(TimeoutError):  # not wait_for: see relay.ingest.retry
                async with asyncio.timeout(wait):
                    await asyncio.shield(task)
            waited += time.monotonic() - now
        self._waited[url] = (start, waited)
        return self._read.get(url, -1e18) >= since

    def _forget_fetch(self, task: asyncio.Task[bool]) -> None:
        for url, running in list(self._inflight.items()):
            if running is task:
                del self._inflight[url]

    async def refresh(self, urls: Iterable[str] | None = None) -> None:
        """Re-read every (or the given) peer's document, concurrently."""
        await asyncio.gather(*(self.resolve(u) for u in (self._urls if urls is None else urls)))
        for callback in list(self.on_refreshed):
            await callback()

    async def _fetch(self, url: str) -> bool:
        self._tried[url] = time.monotonic()
        get = getattr(self._client, "get_well_known", None)
        if get is None:  # a client that cannot read well-known documents
            return False
        try:
            doc = await get(url)
        except PeerError as exc:
            log.info("peer %s: well-known not read (%s)", url, exc)
            return False
        did = parse_did(doc.get("did"))
        if did is None:
            log.warning("peer %s: well-known has no usable 'did'", url)
            return False
        self._set_did(url, did)
        self._advertised[url] = parse_advertised(url, doc.get("peers"))
        self._read[url] = time.monotonic()
        return True

    def _set_did(self, url: str, did: str) -> None:
        old = self._did.get(url)
        if old is not None and old != did and self._url.get(old) == url:
            del self._url[old]
        self._did[url] = did
        self._url.setdefault(did, url)

    # the refresh task -----------------------------------------------------------
    def start(self) -> None:
        if self._task is None and self._urls:
            self._task = asyncio.create_task(self._run(), name="peer directory")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._inflight.values()) if t is not None]
        self._task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        waited = self._refresh_s  # the first pass reads every peer
        while True:
            try:
                if waited >= self._refresh_s:
                    await self.refresh()
                    waited = 0.0
                elif self.unresolved():
                    await self.refresh(self.unresolved())
            except Exception:  # a bug in a callback must not end the task silently
                log.exception("peer directory refresh failed")
            await asyncio.sleep(self._retry_s)
            waited += self._retry_s
