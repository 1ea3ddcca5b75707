"""``dfos-relay reconcile URL``: reconcile a store with a peer relay by
Negentropy rounds, and print what was learned and sent.

One run is bounded (rounds, bytes, time, ids each way: ``ReconcileBounds``).
A run cut short by a bound that moved ops is followed at once by another,
as the relay's own scheduler does, up to ``--runs`` runs; each run prints
its line (or JSON object). A last run still cut short fails the command
(status 1, one line saying to run again): the store is not reconciled yet.

The store is opened as a relay without HTTP or peering (a relay serving
the same SQLite file or Postgres database may run meanwhile): what is
pulled goes through the full ingest pipeline, what is pushed goes to the
peer's POST /operations. The peer is reached first (its well-known
document): a peer that is down or is not a relay fails the run before the
store is opened, so no empty database is left behind (``./dfos-relay.db``
by default). The store is needed for the first round (its items make the
message), so a peer that answers and then fails does so with the store
open: when that store is an SQLite file the command created and the runs
moved nothing either way, it is removed again (``relay.cli.fresh_store``).
"""

from __future__ import annotations

import json

from relay.reconcile.bounds import ReconcileBounds
from relay.reconcile.initiator import Direction, ReconcileReport
from relay.reconcile.server import Window
from relay.scope import Scope


class ReconcileCommandError(Exception):
    """One line for the operator."""


async def reconcile_command(
    url: str,
    store_url: str,
    direction: Direction,
    window_s: float | None,
    as_json: bool,
    *,
    scope: Scope | None = None,
    store_source: str,
    runs: int = 1,
    max_ops: int | None = None,
) -> int:
    from peer.base import normalize_peer_url
    from relay.asgi import store_from_url
    from relay.cli.fresh_store import FreshStore
    from relay.compose import create_relay
    from stores.base import StoreError

    try:
        peer = normalize_peer_url(url)
    except ValueError as exc:
        raise ReconcileCommandError(str(exc)) from None
    store = store_from_url(store_url, store_source)  # a bad URL fails first; not opened yet
    relay = create_relay(store)
    window = None
    if window_s is not None:
        now_ms = relay.clock()
        window = Window(since=max(0, now_ms - int(window_s * 1000)))
    unreached = await _unreached(peer)
    if unreached is not None:  # the same report (and line) as a run that failed
        report = ReconcileReport(peer, direction, window or Window(), error=unreached)
        report.scope_id = None if scope is None else scope.scope_id
        _say(report, as_json, follows=False)  # raises: the run failed
    bounds = None if max_ops is None else ReconcileBounds(max_need=max_ops, max_have=max_ops)
    fresh = FreshStore.of(store)  # before it is opened (and so created)
    moved = False  # any op fetched or pushed by any run: the store is kept
    try:
        async with relay.running():
            for run in range(1, runs + 1):
                report = await relay.reconcile(peer, direction, window, bounds, scope=scope)
                moved = moved or bool(report.fetched or report.pushed)
                follows = run < runs and report.cut_short and report.progressed
                _say(report, as_json, follows)
                if not follows:
                    break
    except (ReconcileCommandError, StoreError) as exc:
        if fresh is not None and not moved:  # closed by now: nothing of use in it
            fresh.remove()
        if isinstance(exc, StoreError):
            raise ReconcileCommandError(f"store {store_url}: {exc}") from None
        raise
    if report.cut_short:  # the last run allowed, still cut short: not reconciled yet
        raise ReconcileCommandError(f"{failure(report)}; {run} run(s): run again to go on")
    return 0


def _say(report: ReconcileReport, as_json: bool, follows: bool) -> None:
    """Print one run's report. A run that failed raises its one line
    instead of a summary (which would read as a success); so does one cut
    short by a bound having moved nothing. One cut short having moved ops
    prints its summary, saying so (the caller follows it or fails)."""
    if as_json:  # the report, failed or not: its "error" says which
        print(json.dumps(report.as_dict()), flush=True)
    if not report.ok and not (report.cut_short and report.progressed):
        raise ReconcileCommandError(failure(report))
    if not as_json:
        print(summary(report, follows), flush=True)


async def _unreached(peer: str) -> str | None:
    """Why ``peer`` does not answer as a relay (its well-known document),
    or None: it does. What it serves is not checked (the run will tell)."""
    from peer.base import PeerError
    from peer.http import HttpPeerClient

    client = HttpPeerClient()
    try:
        await client.get_well_known(peer)
    except PeerError as exc:
        return str(exc)
    finally:
        await client.aclose()
    return None


def failure(report: ReconcileReport) -> str:
    """The one line of a failed run: the peer named once (a peer's errors
    start with its URL), then what was already done, which stays done."""
    error = (report.error or "failed").removeprefix(f"{report.peer}: ")
    done = ""
    if report.fetched or report.pushed:
        done = f" (before that: {report.sequenced} op(s) new here, {report.pushed} sent)"
    return f"{report.peer}: {error}{done}"


def summary(report: ReconcileReport, follows: bool = False) -> str:
    scope = "everything" if report.window.is_everything else f"createdAt >= {report.window.since}"
    if report.scope_id is not None:
        scope = f"{report.scope_id} ({scope})"
    return (
        f"reconciled {scope} with {report.peer} in {report.rounds} round(s), "
        f"{report.bytes_sent} bytes sent and {report.bytes_received} received, "
        f"{report.seconds:.2f}s: "
        f"learned {report.need} op(s) we lacked ({report.fetched} fetched, "
        f"{report.sequenced} new here), "
        f"{report.have} op(s) it lacked ({report.pushed} sent)"
        + _busy(report)
        + _cut_short(report, follows)
    )


def _busy(report: ReconcileReport) -> str:
    if not report.busy:
        return ""
    return f"; the peer was busy {report.busy} time(s), waited {report.busy_waited_s:.1f}s"


def _cut_short(report: ReconcileReport, follows: bool) -> str:
    if not report.cut_short:
        return ""
    return "; cut short at a bound of one run" + (", another follows" if follows else "")
