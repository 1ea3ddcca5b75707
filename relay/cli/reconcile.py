"""``dfos-relay reconcile URL``: reconcile a store with a peer relay once,
by Negentropy rounds, and print what was learned and sent.

The store is opened as a relay without HTTP or peering (a relay serving
the same SQLite file or Postgres database may run meanwhile): what is
pulled goes through the full ingest pipeline, what is pushed goes to the
peer's POST /operations. The peer is reached first (its well-known
document): a peer that is down or is not a relay fails the run before the
store is opened, so no empty database is left behind (``./dfos-relay.db``
by default). A peer that answers and then fails is not caught by this.
"""

from __future__ import annotations

import json

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
) -> int:
    from peer.base import normalize_peer_url
    from relay.asgi import store_from_url
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
    else:
        try:
            async with relay.running():
                report = await relay.reconcile(peer, direction, window, scope=scope)
        except StoreError as exc:
            raise ReconcileCommandError(f"store {store_url}: {exc}") from None
    if as_json:  # the report, failed or not: its "error" says which
        print(json.dumps(report.as_dict()))
    if not report.ok:  # no summary: it would read as a success
        raise ReconcileCommandError(failure(report))
    if not as_json:
        print(summary(report))
    return 0


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


def summary(report: ReconcileReport) -> str:
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
    )
