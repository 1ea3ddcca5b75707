"""The reconciliation calls to a peer, over the same capped, timed HTTP
plumbing as ``HttpPeerClient``:

- ``negentropy``: one Negentropy V1 round (``POST /sync/negentropy``);
- ``fetch_operations``: ops by CID (``POST /sync/operations``), falling
  back to ``GET /operations/{cid}`` one by one for a v0.7.1 peer;
- ``submit_operations`` (inherited): the push side.

A peer without ``/sync/negentropy`` raises ``PeerCannotReconcile``; a
503 or 429 with ``Retry-After`` from either sync route raises ``PeerBusy``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from peer.base import PeerBadStatus, PeerMalformedPage, PeerResponseTooLarge
from peer.feed import FeedClientError, FollowOptions, follow
from peer.http import HttpPeerClient, _body_error, _error_text

NEGENTROPY_PATH = "/sync/negentropy"
OPERATIONS_PATH = "/sync/operations"
MAX_FETCH_CIDS = 1000  # per POST /sync/operations
FALLBACK_CONCURRENCY = 8  # GET /operations/{cid} in flight against a v0.7.1 peer
OCTET_STREAM = "application/octet-stream"


class PeerCannotReconcile(PeerBadStatus):
    """The peer has no Negentropy route (a v0.7.1 relay)."""


@dataclass(frozen=True, slots=True)
class FetchedOperations:
    tokens: list[str]
    missing: list[str]


class HttpSyncClient(HttpPeerClient):
    async def negentropy(
        self,
        peer_url: str,
        message: bytes,
        *,
        since: int | None = None,
        until: int | None = None,
        frame_limit: int = 0,
        scope: str | None = None,
    ) -> bytes:
        """One round; ``scope`` is a ``scope=`` query value (comma-separated members)."""
        params: dict[str, str] = {}
        if scope is not None:
            params["scope"] = scope
        if since is not None:
            params["since"] = str(since)
        if until is not None:
            params["until"] = str(until)
        if frame_limit:
            params["frameLimit"] = str(frame_limit)
        status, body = await self._exchange(
            "POST",
            peer_url,
            NEGENTROPY_PATH,
            params,
            content=message,
            headers={"content-type": OCTET_STREAM},
            busy=True,  # a relay running its bound of long rounds: ``PeerBusy``
        )
        if status in (404, 405):
            raise PeerCannotReconcile(peer_url, status, "no /sync/negentropy")
        if status != 200:
            raise PeerBadStatus(peer_url, status, _body_error(body))
        if frame_limit and len(body) > frame_limit:
            raise PeerMalformedPage(peer_url, f"reply of {len(body)} bytes > frame limit")
        return body

    async def fetch_operations(self, peer_url: str, cids: Sequence[str]) -> FetchedOperations:
        if not 1 <= len(cids) <= MAX_FETCH_CIDS:
            raise ValueError(f"fetch 1..{MAX_FETCH_CIDS} cids, not {len(cids)}")
        status, data = await self._request(
            "POST", peer_url, OPERATIONS_PATH, json_body={"cids": list(cids)}, busy=True
        )
        if status in (404, 405):
            return await self._fetch_one_by_one(peer_url, cids)
        if status == 413:  # the ops would pass the peer's answer bound: ask for fewer
            raise PeerResponseTooLarge(peer_url, _error_text(data))
        if status != 200:
            raise PeerBadStatus(peer_url, status, _error_text(data))
        ops = data.get("operations") if isinstance(data, dict) else None
        missing = data.get("missing") if isinstance(data, dict) else None
        if not _strings(ops) or not _strings(missing):
            raise PeerMalformedPage(peer_url, "POST /sync/operations answer is malformed")
        assert isinstance(ops, list) and isinstance(missing, list)
        if len(ops) > len(cids):
            raise PeerMalformedPage(peer_url, "more operations than were asked for")
        return FetchedOperations(ops, missing)

    async def log_head_cid(self, peer_url: str) -> str | None:
        """The CID of the last entry of the peer's global log (a ``/log``
        cursor that skips everything before it), read from its changes
        feed; None if it has no feed or an empty log."""
        status, known = await self._request("GET", peer_url, "/.well-known/dfos-relay")
        feed = known.get("changesFeed") if status == 200 and isinstance(known, dict) else None
        if not isinstance(feed, dict) or not isinstance(feed.get("headSeq"), int):
            return None
        head, epoch = feed["headSeq"], str(feed.get("epoch", ""))
        if head < 1:
            return None
        options = FollowOptions(live=False, limit=1, max_retries=0)
        # the deadline: a feed that sends heartbeats and never the op would
        # hold the caller (a sync cycle, under its lock) for good
        with contextlib.suppress(FeedClientError, httpx.HTTPError, TimeoutError):
            async with asyncio.timeout(self.limits.request_deadline_s):
                since = f"{epoch}.{head - 1}"
                events = follow(peer_url, since=since, options=options, client=self._client)
                async for event in events:
                    if event.kind == "op" and isinstance(event.data.get("cid"), str):
                        return str(event.data["cid"])
        return None

    async def _fetch_one_by_one(self, peer_url: str, cids: Sequence[str]) -> FetchedOperations:
        """As one POST /sync/operations answer would be: its tokens together
        within the response cap (past it ``PeerResponseTooLarge``, and the
        caller asks for fewer), not up to the cap for each of them."""
        gate = asyncio.Semaphore(FALLBACK_CONCURRENCY)
        cap = self.limits.max_response_bytes
        held = 0

        async def one(cid: str) -> str | None:
            nonlocal held
            async with gate:
                status, data = await self._request("GET", peer_url, f"/operations/{cid}")
            if status == 404:
                return None
            if status != 200 or not isinstance(data, dict):
                raise PeerBadStatus(peer_url, status, _error_text(data))
            token = data.get("jwsToken")
            if not isinstance(token, str):
                raise PeerMalformedPage(peer_url, "operation lacks a string jwsToken")
            held += len(token)
            if held > cap:
                raise PeerResponseTooLarge(peer_url, f"operations passed the {cap}-byte cap")
            return token

        tasks = [asyncio.create_task(one(c)) for c in cids]
        try:
            found = await asyncio.gather(*tasks)
        finally:  # after a failure, the rest are not fetched
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        tokens = [t for t in found if t is not None]
        missing = [c for c, t in zip(cids, found, strict=True) if t is None]
        return FetchedOperations(tokens, missing)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
