"""The ban list as the write gate reads it: an in-process cache of the
store's bans.

``lookup`` is synchronous (the gate runs inside verification). The engine
awaits ``refresh_if_stale`` before each ingest, so a ban written by another
worker sharing the store is seen within ``BAN_REFRESH_S``; a ban or unban
made through this process is seen at once (``refresh``). The gate asks it
only about signers its sequencing session did not read from the store
(``relay.ingest.policy``): the session's read, under the sequencing lock,
is what keeps a purged DID out.

A refresh reads what changed since the store's change mark it last saw
(``BanChangeReader.ban_changes``): when nothing did, one row, whatever the
number of bans; every ban only on the first read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from stores.moderation import BanChangeReader, BanRecord

BAN_REFRESH_S = 1.0


class BanList:
    def __init__(
        self,
        store: BanChangeReader,
        refresh_s: float = BAN_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._refresh_s = refresh_s
        self._clock = clock
        self._bans: dict[str, BanRecord] = {}
        self._mark = 0  # the store's last ban change this list holds
        self._loaded_at: float | None = None
        self._lock = asyncio.Lock()

    def lookup(self, did: str) -> str | None:
        """The ban's reason when ``did`` is banned, else None."""
        ban = self._bans.get(did)
        return None if ban is None else ban.reason

    def records(self) -> list[BanRecord]:
        return [self._bans[did] for did in sorted(self._bans)]

    async def refresh(self) -> None:
        async with self._lock:  # reads applied in the order they were made
            await self._read_changes()

    async def refresh_if_stale(self) -> None:
        if self._fresh():
            return
        async with self._lock:
            if not self._fresh():  # another caller refreshed while we waited
                await self._read_changes()

    async def _read_changes(self) -> None:
        changes = await self._store.ban_changes(self._mark)
        if changes.whole:
            self._bans = {}
        for did in changes.lifted:
            self._bans.pop(did, None)
        for ban in changes.banned:
            self._bans[ban.did] = ban
        self._mark = changes.mark
        self._loaded_at = self._clock()

    def _fresh(self) -> bool:
        return self._loaded_at is not None and self._clock() - self._loaded_at < self._refresh_s
