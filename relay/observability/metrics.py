"""Prometheus metrics of one relay, on that relay's own ``CollectorRegistry``
(so several relays in one process, as in tests, never share counters).

Recording API (cheap, synchronous, safe to call from any task):

- ``record_ingestion(results)``: ``dfos_relay_ingested_total{kind,status}``
- ``observe_request(method, route, status, seconds)``: latency histogram
- ``peer_sync(url, lag, ok)``: for the peering code after each sync-in
  cycle against one peer; ``lag`` is how many ops that cycle pulled (the
  distance the relay was behind), ``ok`` False counts a failure.
- ``refresh(store)``: gauges read from the store at scrape time (log
  length, pending-buffer size).
- ``record_rejections(reasons)``: ``dfos_relay_rejections_total{reason}``,
  every rejection the pipeline decides (ops that only wait for a dependency
  are not rejections: they show in the pending gauges).
- ``set_pending(by_dependency, oldest_age_s)``: the pending buffer by what
  its ops wait for, and how long the oldest has waited (from the relay's
  pending overview at scrape time).
- ``push_unproven(reason)``: ``dfos_relay_peer_pushes_unproven_total{reason}``,
  pushes naming a sender relay whose sender proof was missing, invalid or
  not checkable (the sender's identity not held), taken as a client's.
- ``links.update(views)``: the replication ledger's gauges per link
  (``link_metrics``), at scrape time.
- ``scope_out_of_scope(peer, count)``:
  ``dfos_relay_scope_out_of_scope_total{peer}``, ops a peer served for our
  scope (scoped pages, feed, reconciliation) that the scope does not hold:
  not ingested (``relay.scope.guard``).
- ``parse_queue_refused(body)``: ``dfos_relay_parse_queue_refused_total{body}``,
  costly bodies answered 503 because ``parse_queue`` of them already waited
  for the parse child (``operations`` or ``documents``).
- ``receive_budget_refused()``: ``dfos_relay_receive_budget_refused_total``,
  request bodies answered 503 because the receive budget was taken; and
  ``watch_receive_budget(held)``: ``dfos_relay_receive_budget_held_bytes``,
  the bytes reserved by bodies being received, read at scrape time.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .link_metrics import LinkMetrics
from .reconcile_metrics import ReconcileMetrics

__all__ = ["CONTENT_TYPE", "RelayMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNKNOWN_KIND = "unknown"
PARSE_QUEUE_BODIES = ("operations", "documents")  # POST /operations, content-plane uploads


class _Result(Protocol):
    @property
    def status(self) -> Any: ...
    @property
    def kind(self) -> str | None: ...


class _Store(Protocol):
    async def log_length(self) -> int: ...
    async def count_unsequenced(self) -> int: ...


FEED_LAG_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.ingested = Counter(
            "dfos_relay_ingested",
            "Operations ingested, by kind and result status",
            ["kind", "status"],
            registry=r,
        )
        self.pending = Gauge(
            "dfos_relay_pending_operations", "Operations buffered but not sequenced", registry=r
        )
        self.pending_by_dependency = Gauge(
            "dfos_relay_pending_by_dependency",
            "Buffered operations by what they wait for: op, did, none (not yet verified), "
            "or copy (another token of a buffered op's CID, waiting beside it)",
            ["dependency"],
            registry=r,
        )
        self.pending_oldest_age = Gauge(
            "dfos_relay_pending_oldest_age_seconds",
            "How long the oldest waiting operation has waited (0 when none waits)",
            registry=r,
        )
        self.rejections = Counter(
            "dfos_relay_rejections", "Operations rejected, by reason", ["reason"], registry=r
        )
        self.log_length = Gauge(
            "dfos_relay_log_length", "Entries in the relay's global operation log", registry=r
        )
        self.request_latency = Histogram(
            "dfos_relay_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.peer_lag = Gauge(
            "dfos_relay_peer_sync_lag_operations",
            "Operations pulled from the peer by its last sync cycle",
            ["peer"],
            registry=r,
        )
        self.peer_syncs = Counter(
            "dfos_relay_peer_syncs",
            "Sync-in cycles per peer, by result",
            ["peer", "result"],
            registry=r,
        )
        self.peer_failures = Counter(
            "dfos_relay_peer_sync_failures",
            "Failed sync-in cycles per peer",
            ["peer"],
            registry=r,
        )
        self.pushes_unproven = Counter(
            "dfos_relay_peer_pushes_unproven",
            "Pushes naming a sender relay without a valid sender proof (taken as a client's)",
            ["reason"],  # missing, invalid, unknown_identity
            registry=r,
        )

        self.scope_out_of_scope_total = Counter(
            "dfos_relay_scope_out_of_scope",
            "Operations a peer served for our scope that the scope does not hold (not ingested)",
            ["peer"],
            registry=r,
        )
        self.parse_queue_refusals = Counter(
            "dfos_relay_parse_queue_refused",
            "Costly request bodies answered 503 because too many waited for the parse child, "
            "by what they were: operations (POST /operations) or documents (blob uploads)",
            ["body"],
            registry=r,
        )
        for body in PARSE_QUEUE_BODIES:
            self.parse_queue_refusals.labels(body)
        self.receive_budget_refusals = Counter(
            "dfos_relay_receive_budget_refused",
            "Request bodies answered 503 because the receive budget was taken",
            registry=r,
        )
        self.receive_budget_held = Gauge(
            "dfos_relay_receive_budget_held_bytes",
            "Bytes of request bodies being received, reserved in the receive budget",
            registry=r,
        )

        self.reconcile = ReconcileMetrics(r)
        self.links = LinkMetrics(r)

        # the changes feed
        self.feed_subscribers = Gauge(
            "dfos_relay_feed_subscribers", "Open changes-feed subscriptions", ["transport"],
            registry=r,
        )  # fmt: skip
        for transport in ("sse", "websocket"):
            self.feed_subscribers.labels(transport)
        self.feed_events = Counter(
            "dfos_relay_feed_events", "Changes-feed events sent to subscribers", registry=r
        )
        self.feed_lag = Histogram(
            "dfos_relay_feed_lag_operations",
            "Head seq minus the seq just delivered, per write to a subscriber",
            buckets=FEED_LAG_BUCKETS,
            registry=r,
        )
        self.feed_slow_closed = Counter(
            "dfos_relay_feed_slow_consumers_closed",
            "Subscribers closed because they stayed unwritable past the send timeout",
            registry=r,
        )
        self.feed_unanswered_closed = Counter(
            "dfos_relay_feed_pings_unanswered_closed",
            "WebSockets closed because the client sent nothing, not even a pong, "
            "for several ping intervals",
            registry=r,
        )
        self.feed_gone = Counter(
            "dfos_relay_feed_gone", "410 Gone answers (below the replay window or another epoch)",
            registry=r,
        )  # fmt: skip

    def feed_delivered(self, seq: int, head_seq: int, count: int = 1) -> None:
        """``count`` events sent in one write, the last at ``seq``: the lag is
        sampled once per write (per event would cost more than the send)."""
        self.feed_events.inc(count)
        self.feed_lag.observe(max(0, head_seq - seq))

    def record_ingestion(self, results: Iterable[_Result]) -> None:
        # Counted first: a labelled child costs a lock and a lookup per call.
        counts: collections.Counter[tuple[str, str]] = collections.Counter(
            (result.kind or UNKNOWN_KIND, str(getattr(result.status, "value", result.status)))
            for result in results
        )
        for labels, n in counts.items():
            self.ingested.labels(*labels).inc(n)

    def record_rejections(self, reasons: Iterable[Any]) -> None:
        for reason in reasons:
            self.rejections.labels(str(getattr(reason, "value", reason))).inc()

    def set_pending(self, by_dependency: dict[str, int], oldest_age_s: float) -> None:
        for dependency, count in by_dependency.items():
            self.pending_by_dependency.labels(dependency).set(count)
        self.pending_oldest_age.set(oldest_age_s)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.request_latency.labels(method, route, str(status)).observe(seconds)

    def peer_sync(self, url: str, lag: int | float | None, ok: bool) -> None:
        self.peer_syncs.labels(url, "ok" if ok else "failed").inc()
        if ok and lag is not None:
            self.peer_lag.labels(url).set(lag)
        if not ok:
            self.peer_failures.labels(url).inc()

    def scope_out_of_scope(self, url: str, count: int) -> None:
        self.scope_out_of_scope_total.labels(url).inc(count)

    def push_unproven(self, reason: str) -> None:
        self.pushes_unproven.labels(reason).inc()

    def parse_queue_refused(self, body: str) -> None:
        """One ``body`` (of ``PARSE_QUEUE_BODIES``) refused: the parse queue was full."""
        self.parse_queue_refusals.labels(body).inc()

    def receive_budget_refused(self) -> None:
        self.receive_budget_refusals.inc()

    def watch_receive_budget(self, held: Callable[[], int]) -> None:
        """The held-bytes gauge reads ``held()`` at each scrape."""
        self.receive_budget_held.set_function(held)

    async def refresh(self, store: _Store) -> None:
        self.log_length.set(await store.log_length())
        self.pending.set(await store.count_unsequenced())

    def render(self) -> bytes:
        return generate_latest(self.registry)
