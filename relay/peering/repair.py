"""The ``reconcile`` peer behaviour: range-based reconciliation as the
repair path behind gossip, sync and ``live``.

For each reconcile peer, one task:
- runs a full reconciliation soon after start;
- then every ``reconcile_interval_s`` a run over the last
  ``reconcile_window_s`` of createdAt, and a full run every
  ``reconcile_full_every``-th time (an op created long ago can still
  arrive late, so the window alone is not enough);
- runs at once when asked (``request``): after a feed gap or an unknown
  log cursor, which without it cost a full log replay.

Each run is bounded (``PeeringConfig.reconcile_bounds``); a failed run
backs the peer off under the shared per-peer ``Backoff``. A run cut short
by a bound on its size that moved ops is not a failure: the next run (over
the same window) follows at once, up to ``reconcile_follow_ons`` in a row,
so a difference larger than one run converges at the pace of the runs, not
of the backoff. What a peer took is its word: a peer that says it took
everything and still lacks it must not keep us pushing, so ops it named as
lacking after answering ``new`` to them are not pushed again, are no
progress, and when they are many fail the run (``relay.reconcile.answers``). Cut
short without moving anything, it is a failure like any other. Either way
the next scheduled run covers the same window: the rest of a full run cut
short does not wait ``reconcile_full_every`` intervals for the next full one.

The replication ledger: a requested repair holds the in-link ``repairing``
while it runs; every run records success or failure on the in-link; a run
that pushed clears the out-link's held watermark (``OutLinks.repaired``).
A peer that answered a run "busy" (503/429 with ``Retry-After``, waited out
by the run: ``relay.reconcile.initiator``) is named in the in-link's
diagnostics (``busy``) until a run meets it not busy; only a run that ended
on a busy answer (past the run's bound) is a failure.
A paused in-link is not pulled from and a paused out-link not pushed to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from relay.reconcile.initiator import (
    Direction,
    ReconcileAborted,
    ReconcileBounds,
    ReconcileReport,
)
from relay.reconcile.server import Window
from relay.scope import Scope, ScopeGuard

from .backoff import Backoff
from .config import PeeringConfig
from .ledger import LinkLedger
from .scope_check import ScopeCheck
from .tasks import cancel_all
from .watermark import OutLinks

log = logging.getLogger("dfos_relay.peering")

BUSY = "busy"  # in-link diagnostics: the last run's busy answers from the peer


@runtime_checkable
class ReconcilingHost(Protocol):
    async def reconcile(
        self,
        peer_url: str,
        direction: Direction = "both",
        window: Window | None = None,
        bounds: ReconcileBounds | None = None,
        *,
        scope: Scope | None = None,
        guard: ScopeGuard | None = None,
    ) -> ReconcileReport: ...


class ReconcileRepair:
    def __init__(self, peer_urls: Sequence[str], backoff: Backoff, config: PeeringConfig) -> None:
        self._peers = tuple(peer_urls)
        self._backoff = backoff
        self._config = config
        self._host: ReconcilingHost | None = None
        self._wake = {url: asyncio.Event() for url in self._peers}
        self._tasks: list[asyncio.Task[None]] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self.last: dict[str, ReconcileReport] = {}  # the latest run per peer
        # ops a run pulled that wait for a dependency (reconcile-only peers;
        # live follow tracks its own): the in-link is repairing until none wait
        self._waiting: dict[str, dict[str, str]] = {}
        self.ledger = LinkLedger()  # the peering service shares its own
        self.scope_check = ScopeCheck(None)  # the peering service shares its own
        self.out_links: OutLinks | None = None

    def start(self, host: ReconcilingHost) -> None:
        self._host = host
        self._tasks = [
            asyncio.create_task(self._run(url), name=f"reconcile {url}") for url in self._peers
        ]

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        self._host = None

    def request(self, url: str) -> None:
        """Run against ``url`` now (a configured reconcile peer)."""
        if url in self._wake:
            self._wake[url].set()

    async def repaired(self, url: str) -> bool:
        """Pull everything ``url`` has that we lack, by reconciliation; False
        when that is not possible (the peer cannot reconcile, or the run
        failed), so the caller falls back to a full log replay."""
        async with self.ledger.repairing(url):
            report = await self.run_once(url, direction="pull")
            for _ in range(self._config.reconcile_follow_ons):
                if report is None or not _goes_on(report):
                    break
                report = await self.run_once(url, direction="pull")
        return report is not None and report.ok

    async def run_once(
        self, url: str, direction: Direction = "both", window: Window | None = None
    ) -> ReconcileReport | None:
        """One run against ``url`` (any peer), serialized per peer."""
        host = self._host
        allowed = self._unpaused(url, direction)
        if host is None or allowed is None:
            return None
        direction = allowed
        head = self.out_links.head if self.out_links is not None else 0
        bounds = self._config.reconcile_bounds
        async with self._locks.setdefault(url, asyncio.Lock()):
            scope, guard = self._config.scope, self.scope_check.guard
            report = await host.reconcile(url, direction, window, bounds, scope=scope, guard=guard)
        self.last[url] = report
        await self._record(url, direction, report, head)
        if _goes_on(report):
            self._backoff.success(url)
            log.info(
                "reconciled with %s in part (%s): %d sequenced from it, %d pushed to it;"
                " going on", url, report.error, report.sequenced, report.pushed,
            )  # fmt: skip
        elif report.ok:
            self._backoff.success(url)
            if report.have or report.need:
                log.info(
                    "reconciled with %s: %d sequenced from it, %d pushed to it",
                    url, report.sequenced, report.pushed,
                )  # fmt: skip
        else:
            self._backoff.failure(url, "reconcile", ReconcileAborted(report.error or "failed"))
        return report

    def _unpaused(self, url: str, direction: Direction) -> Direction | None:
        pull = direction != "push" and not self.ledger.paused(url, "in")
        push = direction != "pull" and not self.ledger.paused(url, "out")
        return "both" if pull and push else "pull" if pull else "push" if push else None

    async def _record(self, url: str, direction: Direction, report: ReconcileReport,
                      head: int) -> None:  # fmt: skip
        self._note_busy(url, report)
        if _goes_on(report):  # not caught up, not failing either
            await self.ledger.success(url, "in")
            if url not in self.ledger.followed:
                await self.ledger.set_state(url, "in", "repairing")
            return
        if not report.ok:
            await self.ledger.failure(url, "in", report.error or "reconciliation failed")
            return
        await self.ledger.success(url, "in")
        if url not in self.ledger.followed and await self._still_waiting(url, report):
            await self.ledger.set_state(url, "in", "repairing")
        elif url not in self.ledger.followed and self.ledger.get(url, "in").state == "repairing":
            await self.ledger.set_state(url, "in", "live")
        else:
            await self.ledger.settle(url)
        if direction != "pull" and self.out_links is not None:
            await self.out_links.repaired(url, head)

    def _note_busy(self, url: str, report: ReconcileReport) -> None:
        diagnostics = dict(self.ledger.get(url, "in").diagnostics)
        if report.busy:
            waited = round(report.busy_waited_s, 3)
            diagnostics[BUSY] = {"answers": report.busy, "waitedS": waited,
                                 "atMs": self.ledger.clock(), "runOk": report.ok}  # fmt: skip
        elif diagnostics.pop(BUSY, None) is None:
            return
        self.ledger.note(url, "in", diagnostics=diagnostics)

    async def _still_waiting(self, url: str, report: ReconcileReport) -> bool:
        """Record what the run's pulled ops wait for; True while any still wait
        (a scoped op whose closure the peer could not satisfy, say)."""
        waiting = self._waiting.setdefault(url, {})
        waiting.update(dict.fromkeys(report.waiting, ""))
        still, _ = await self.ledger.waiting(url, waiting)
        self._waiting[url] = still
        return bool(still)

    async def _run(self, url: str) -> None:
        interval = self._config.reconcile_interval_s
        runs = 0
        while True:
            full = runs % self._config.reconcile_full_every == 0
            window = None if full else self._window()
            if self._backoff.ready(url):
                try:
                    report = await self.run_once(url, window=window)
                    # cut short, having moved ops: the same window again at once
                    for _ in range(self._config.reconcile_follow_ons):
                        if report is None or not _goes_on(report):
                            break
                        report = await self.run_once(url, window=window)
                    if report is None or not report.cut_short:
                        runs += 1  # else its rest is for the next run, over the same window
                except Exception:  # a store failure must not end the loop silently
                    log.exception("reconcile with %s failed", url)
            wake = self._wake[url]
            with contextlib.suppress(TimeoutError):  # not wait_for: see relay.ingest.retry
                async with asyncio.timeout(self._pause(url, interval)):
                    await wake.wait()
            if wake.is_set():
                wake.clear()
                runs = 0  # a requested run is a full one

    def _window(self) -> Window:
        now_ms = int(time.time() * 1000)
        return Window(since=max(0, now_ms - int(self._config.reconcile_window_s * 1000)))

    def _pause(self, url: str, interval: float | None) -> float | None:
        if not self._backoff.ready(url):
            return max(0.05, self._backoff.delay(url))
        return interval


def _goes_on(report: ReconcileReport) -> bool:
    """Cut short by a bound on its size after moving ops: the rest is for a
    run right after it."""
    return report.cut_short and report.progressed
