"""Gauges of the replication ledger, one series per link (labels peer,
scope, direction), set from the links at scrape time:

- ``dfos_relay_link_state{state}``        1 for the link's state, 0 for the others
- ``dfos_relay_link_lag_operations``      ops behind (absent while unknown)
- ``dfos_relay_link_lag_seconds``         0 while caught up (absent while unknown)
- ``dfos_relay_link_failures``            consecutive failures

Series of links that are gone are removed on the next scrape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge

STATES = ("initial", "live", "degraded_poll", "repairing", "paused")


class _Record(Protocol):
    @property
    def peer_url(self) -> str: ...
    @property
    def scope_id(self) -> str: ...
    @property
    def direction(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def failures(self) -> int: ...


class _View(Protocol):
    @property
    def record(self) -> _Record: ...
    @property
    def lag_ops(self) -> int | None: ...
    @property
    def lag_seconds(self) -> float | None: ...


class LinkMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["peer", "scope", "direction"]
        self.state = Gauge(
            "dfos_relay_link_state", "Replication link state (1 for the current state)",
            [*labels, "state"], registry=registry,
        )  # fmt: skip
        self.lag_ops = Gauge(
            "dfos_relay_link_lag_operations", "Operations the replication link is behind",
            labels, registry=registry,
        )  # fmt: skip
        self.lag_seconds = Gauge(
            "dfos_relay_link_lag_seconds",
            "Seconds since the replication link was last caught up (0 while it is)",
            labels, registry=registry,
        )  # fmt: skip
        self.failures = Gauge(
            "dfos_relay_link_failures", "Consecutive failures of the replication link",
            labels, registry=registry,
        )  # fmt: skip
        self._seen: set[tuple[str, str, str]] = set()

    def update(self, views: Iterable[_View]) -> None:
        seen: set[tuple[str, str, str]] = set()
        for view in views:
            r = view.record
            key = (r.peer_url, r.scope_id, r.direction)
            seen.add(key)
            for state in STATES:
                self.state.labels(*key, state).set(1 if r.state == state else 0)
            self.failures.labels(*key).set(r.failures)
            self._set_or_remove(self.lag_ops, key, view.lag_ops)
            self._set_or_remove(self.lag_seconds, key, view.lag_seconds)
        for key in self._seen - seen:
            for state in STATES:
                self.state.remove(*key, state)
            for gauge in (self.failures, self.lag_ops, self.lag_seconds):
                self._set_or_remove(gauge, key, None)
        self._seen = seen

    @staticmethod
    def _set_or_remove(gauge: Gauge, key: tuple[str, str, str], value: float | None) -> None:
        if value is not None:
            gauge.labels(*key).set(value)
            return
        with contextlib.suppress(KeyError):  # never set
            gauge.remove(*key)
