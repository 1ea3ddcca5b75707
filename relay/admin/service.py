"""What an admitted operator can do, each action audited (``audit.py``).

The HTTP routes (``relay.http.admin``) parse requests and shape answers;
here live the actions over the relay they administer (``AdminHost``, which
``relay.engine.Relay`` satisfies). A refused action raises ``AdminError``
with the status it should answer; it is audited as ``refused``.

Process-local actions (the log level; a sync run) apply to the worker that
served the call; bans, purges and dropped ops are in the store and apply to
every worker sharing it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from relay.config import RelayConfig
from relay.observability.logging import LOG_LEVELS
from relay.peering.api import PeerState
from relay.protocol import is_dfos_did
from stores.base import RelayStore
from stores.moderation import BanRecord, ModerationBatch

from .audit import AUDIT_LOGGER, audit
from .auth import AdminCaller
from .bans import BanList
from .purge import buffered_by, keep_copies
from .purge_steps import purge_in_steps

MAX_BAN_REASON = 500
MAX_LOGGER_NAME_SHOWN = 64  # of an unknown logger's name, in the 400


class AdminError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AdminHost(Protocol):
    store: RelayStore
    config: RelayConfig
    clock: Callable[[], int]
    bans: BanList

    @property
    def did(self) -> str: ...
    async def sync_from_peers(self) -> int: ...
    async def sync_peer(self, url: str) -> int: ...
    def peer_states(self) -> list[PeerState]: ...
    async def trigger_reconcile(self, peer_url: str) -> dict[str, Any]: ...
    async def pause_peer(self, url: str, directions: Sequence[str] = ...) -> None: ...
    async def resume_peer(self, url: str, directions: Sequence[str] = ...) -> None: ...
    async def forget_purged(self, finished: bool = ...) -> None: ...


@dataclass(frozen=True, slots=True)
class PurgeReport:
    operations: int
    by_kind: dict[str, int]
    chains_removed: int
    chains_rewound: int
    buffered_dropped: int
    first_seq: int | None
    last_seq: int | None


@dataclass(frozen=True, slots=True)
class BanOutcome:
    ban: BanRecord
    purge: PurgeReport | None = None


@dataclass(frozen=True, slots=True)
class BanListing:
    ban: BanRecord
    purged: dict[str, int] = field(default_factory=dict)  # by kind


class Admin:
    def __init__(self, host: AdminHost, caller: AdminCaller) -> None:
        self.host = host
        self.caller = caller

    def _ok(self, action: str, **fields: Any) -> None:
        audit(action, self.caller.did, "ok", token_id=self.caller.token_id, **fields)

    def _refuse(self, action: str, status: int, message: str, **fields: Any) -> AdminError:
        audit(action, self.caller.did, "refused", token_id=self.caller.token_id,
              error=message, **fields)  # fmt: skip
        return AdminError(status, message)

    # bans ------------------------------------------------------------------
    async def ban(self, did: str, reason: str, purge: bool) -> BanOutcome:
        if not is_dfos_did(did):
            raise self._refuse("ban", 400, "did must be a did:dfos DID", did=did)
        if did == self.host.did or did in self.host.config.admin_dids:
            raise self._refuse("ban", 400, "this relay and its operators cannot be banned", did=did)
        if len(reason) > MAX_BAN_REASON:
            raise self._refuse("ban", 400, f"reason exceeds {MAX_BAN_REASON} characters", did=did)
        ban = BanRecord(did, reason, self.host.clock(), self.caller.did)
        await self.host.store.put_ban(ban)  # before any purge: nothing new lands meanwhile
        await self.host.bans.refresh()
        fields: dict[str, Any] = {"did": did, "reason": reason, "purge": purge}
        try:
            report = await self._purge(did) if purge else None
        except Exception as exc:  # the ban stands (stored first): the trail must show it
            audit("ban", self.caller.did, "failed", token_id=self.caller.token_id,
                  error=f"banned, but the purge failed: {exc}", **fields)  # fmt: skip
            raise
        if report is not None:
            fields.update(purged_operations=report.operations, purged_by_kind=report.by_kind,
                          chains_removed=report.chains_removed,
                          chains_rewound=report.chains_rewound,
                          buffered_dropped=report.buffered_dropped)  # fmt: skip
        self._ok("ban", **fields)
        return BanOutcome(ban, report)

    async def _purge(self, did: str) -> PurgeReport:
        totals = await purge_in_steps(
            self.host.store, did, self.host.clock(), self.host.forget_purged,
            self.host.config.purge_step_ops,
        )  # fmt: skip
        seqs = [op.seq for op in totals.operations]
        return PurgeReport(
            len(totals.operations),
            dict(Counter(op.kind for op in totals.operations)),
            len(totals.chains_removed),
            len(totals.chains_rewound),
            totals.buffered_dropped,
            min(seqs, default=None),
            max(seqs, default=None),
        )

    async def unban(self, did: str) -> None:
        if not await self.host.store.delete_ban(did):
            raise self._refuse("unban", 404, f"{did} is not banned", did=did)
        await self.host.bans.refresh()
        self._ok("unban", did=did)

    async def bans(
        self, limit: int, after: str | None = None
    ) -> tuple[list[BanListing], str | None]:
        """Up to ``limit`` bans after the DID ``after``, each with its purge's
        counts; and the cursor (the last DID) while more may follow."""
        store = self.host.store
        page = await store.list_bans(limit + 1, after)  # one more: does another page follow?
        more, page = len(page) > limit, page[:limit]
        purged = await store.count_purged([ban.did for ban in page])
        listing = [BanListing(ban, purged.get(ban.did, {})) for ban in page]
        self._ok("list-bans", count=len(listing), after=after)
        return listing, (page[-1].did if more else None)

    # the raw buffer ----------------------------------------------------------
    async def drop_waiting(self, did: str | None, older_than_s: int | None) -> int:
        if did is None and older_than_s is None:
            raise self._refuse("drop-waiting", 400, "give did, olderThanSeconds, or both")
        cutoff = None if older_than_s is None else self.host.clock() - older_than_s * 1000
        store = self.host.store
        async with store.moderating() as session:
            batch = ModerationBatch(raw_cids=await buffered_by(store, did, cutoff))
            await keep_copies(store, batch, did)
            dropped = await session.apply_moderation(batch)
        self._ok("drop-waiting", did=did, older_than_s=older_than_s, dropped=dropped)
        return dropped

    # peers ---------------------------------------------------------------------
    def peers(self) -> list[PeerState]:
        states = self.host.peer_states()
        self._ok("list-peers", count=len(states))
        return states

    async def sync(self, peer: str | None) -> int:
        if peer is None:
            count = await self.host.sync_from_peers()
        else:
            try:
                count = await self.host.sync_peer(peer)
            except KeyError:
                raise self._refuse("sync", 404, f"{peer} is not a configured peer") from None
        self._ok("sync", peer=peer, sequenced=count)
        return count

    async def reconcile(self, peer: str) -> dict[str, Any]:
        try:
            result = await self.host.trigger_reconcile(peer)
        except KeyError:
            raise self._refuse("reconcile", 404, f"{peer} is not a configured peer") from None
        self._ok("reconcile", peer=peer, result=result)
        return result

    async def pause(self, peer: str, directions: Sequence[str], resume: bool = False) -> None:
        """Pause (or resume) a configured peer's links; the state is in the ledger."""
        action = "resume-peer" if resume else "pause-peer"
        try:
            if resume:
                await self.host.resume_peer(peer, directions)
            else:
                await self.host.pause_peer(peer, directions)
        except KeyError:
            raise self._refuse(action, 404, f"{peer} is not a configured peer") from None
        self._ok(action, peer=peer, directions=list(directions))

    # logging -------------------------------------------------------------------
    def set_log_level(self, level: str, logger: str | None) -> tuple[str, str]:
        """Set ``logger`` (default: the root) to ``level``; (previous, new)."""
        if level not in LOG_LEVELS:
            raise self._refuse("log-level", 400, f"level must be one of {', '.join(LOG_LEVELS)}")
        if logger == AUDIT_LOGGER or (logger or "").startswith(AUDIT_LOGGER + "."):
            raise self._refuse("log-level", 400, "the audit trail's level cannot be changed")
        if logger and logger not in logging.Logger.manager.loggerDict:
            # getLogger would create it, and keep it for good: one per name sent
            named = json.dumps(logger[:MAX_LOGGER_NAME_SHOWN])
            raise self._refuse("log-level", 400, f"no logger named {named} in this relay")
        target = logging.getLogger(logger) if logger else logging.getLogger()
        previous = logging.getLevelName(target.getEffectiveLevel()).lower()
        target.setLevel(level.upper())
        self._ok("log-level", target_logger=logger or "root", previous=previous, new=level)
        return previous, level

    def log_levels(self) -> dict[str, str]:
        levels = log_levels()
        self._ok("get-log-level")
        return levels

    # the replication ledger ----------------------------------------------------
    async def ledger(self) -> dict[str, str]:
        cursors = await self.host.store.list_peer_cursors()
        self._ok("ledger", count=len(cursors))
        return cursors


def log_levels() -> dict[str, str]:
    """The root level and every ``dfos_relay`` logger set explicitly."""
    levels = {"root": logging.getLevelName(logging.getLogger().level).lower()}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and logger.level and name.startswith("dfos_relay"):
            levels[name] = logging.getLevelName(logger.level).lower()
    return levels
