"""Reconciliation metrics: rounds, bytes each way, ids have/need, ids not
pushed again (held back: the peer parked them; taken before: it said it
took them), busy answers (503/429 with Retry-After: waited out, not a
failure, unless past the run's bound) and run duration per peer (initiator
side), and rounds served (server side)."""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

RUN_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)


class _Report(Protocol):
    @property
    def peer(self) -> str: ...
    @property
    def rounds(self) -> int: ...
    @property
    def bytes_sent(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def have(self) -> int: ...
    @property
    def need(self) -> int: ...
    @property
    def held_back(self) -> int: ...
    @property
    def taken_before(self) -> int: ...
    @property
    def busy(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def ok(self) -> bool: ...
    @property
    def cut_short(self) -> bool: ...


class ReconcileMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.runs = Counter(
            "dfos_relay_reconcile_runs",
            "Reconciliation runs per peer, by result (ok, cut-short by a bound, failed)",
            ["peer", "result"], registry=r,
        )  # fmt: skip
        self.rounds = Counter(
            "dfos_relay_reconcile_rounds", "Negentropy rounds initiated, per peer",
            ["peer"], registry=r,
        )  # fmt: skip
        self.bytes = Counter(
            "dfos_relay_reconcile_bytes", "Negentropy message bytes per peer and direction",
            ["peer", "direction"], registry=r,
        )  # fmt: skip
        self.ids = Counter(
            "dfos_relay_reconcile_ids",
            "Ids learned per peer: have (ours, not theirs) and need (theirs, not ours)",
            ["peer", "side"], registry=r,
        )  # fmt: skip
        # the report's heldBack and takenBefore (relay.reconcile.answers): a
        # peer's taken-before count growing run after run is one that lies
        self.held_back = Counter(
            "dfos_relay_reconcile_held_back",
            "Ids named as lacking and not pushed, per peer: it parked them when pushed before",
            ["peer"], registry=r,
        )  # fmt: skip
        self.taken_before = Counter(
            "dfos_relay_reconcile_taken_before",
            "Ids named as lacking and not pushed, per peer: it answered new to them before",
            ["peer"], registry=r,
        )  # fmt: skip
        self.busy = Counter(
            "dfos_relay_reconcile_busy",
            "Busy answers per peer (503 or 429 with Retry-After to a round or a fetch)",
            ["peer"], registry=r,
        )  # fmt: skip
        self.seconds = Histogram(
            "dfos_relay_reconcile_run_seconds", "Wall time of one reconciliation run",
            ["peer"], buckets=RUN_SECONDS_BUCKETS, registry=r,
        )  # fmt: skip
        self.served = Counter(
            "dfos_relay_negentropy_rounds_served", "Negentropy rounds answered", registry=r
        )
        self.served_bytes = Counter(
            "dfos_relay_negentropy_served_bytes", "Negentropy bytes served, by direction",
            ["direction"], registry=r,
        )  # fmt: skip

    def run(self, report: _Report) -> None:
        peer = report.peer
        result = "ok" if report.ok else "cut-short" if report.cut_short else "failed"
        self.runs.labels(peer, result).inc()
        self.rounds.labels(peer).inc(report.rounds)
        self.bytes.labels(peer, "sent").inc(report.bytes_sent)
        self.bytes.labels(peer, "received").inc(report.bytes_received)
        self.ids.labels(peer, "have").inc(report.have)
        self.ids.labels(peer, "need").inc(report.need)
        self.held_back.labels(peer).inc(report.held_back)
        self.taken_before.labels(peer).inc(report.taken_before)
        self.busy.labels(peer).inc(report.busy)
        self.seconds.labels(peer).observe(report.seconds)

    def round_served(self, bytes_in: int, bytes_out: int) -> None:
        self.served.inc()
        self.served_bytes.labels("in").inc(bytes_in)
        self.served_bytes.labels("out").inc(bytes_out)
