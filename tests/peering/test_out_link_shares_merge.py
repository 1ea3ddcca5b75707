"""How the processes' shares of an out-link merge into the link shown
(``relay.peering.link_merge``): the lowest watermark, the worst state (the
operator's pause first), the most failures with the latest error, caught
up when the slowest share is; no shares: the link as written. And when a
share's writer counts as gone."""

from __future__ import annotations

from dataclasses import replace

from relay.peering.link_merge import MARK_STALE_MS, is_gone, merge_out
from stores.base import FULL_SCOPE, LinkRecord

LINK = LinkRecord("https://peer.example", FULL_SCOPE, "out", state="live", applied_token="9",
                  diagnostics={"note": 1}, updated_ms=5)  # fmt: skip


def share(applied: str | None, **fields: object) -> LinkRecord:
    return replace(LinkRecord(LINK.peer_url, FULL_SCOPE, "out", applied_token=applied), **fields)


def test_no_shares_is_the_link_as_written() -> None:
    assert merge_out(LINK, []) == LINK


def test_the_lowest_watermark_and_the_worst_state() -> None:
    merged = merge_out(LINK, [
        share("12", state="live", received_token="12", pending_tokens=("11",)),
        share("7", state="repairing", received_token="10", pending_tokens=("8", "10")),
        share("30", state="initial", received_token="30"),
    ])  # fmt: skip
    assert (merged.applied_token, merged.received_token, merged.state) == ("7", "30", "repairing")
    assert merged.pending_tokens == ("8", "10", "11")
    assert merged.diagnostics == {"note": 1}  # the link's own


def test_an_unknown_watermark_makes_the_merged_one_unknown() -> None:
    assert merge_out(LINK, [share("12"), share(None)]).applied_token is None


def test_the_operators_pause_comes_first_and_a_share_never_pauses() -> None:
    paused = replace(LINK, state="paused")
    assert merge_out(paused, [share("1", state="live")]).state == "paused"
    merged = merge_out(LINK, [share("1", state="paused"), share("2", state="live")])
    assert merged.state == "live"  # a share that has not heard of a resume yet


def test_the_most_failures_with_the_latest_error() -> None:
    merged = merge_out(LINK, [
        share("1", failures=3, last_failure_ms=100, last_error="old", last_success_ms=50),
        share("2", failures=1, last_failure_ms=200, last_error="new", last_success_ms=300),
    ])  # fmt: skip
    assert (merged.failures, merged.last_error) == (3, "new")
    assert (merged.last_failure_ms, merged.last_success_ms) == (200, 300)


def test_caught_up_when_the_slowest_share_is() -> None:
    both = [share("1", caught_up_ms=100, updated_ms=7), share("2", caught_up_ms=300)]
    merged = merge_out(LINK, both)
    assert (merged.caught_up_ms, merged.updated_ms) == (100, 7)
    assert merge_out(LINK, [*both, share("3")]).caught_up_ms is None  # one never caught up


def test_a_share_is_gone_when_left_behind_or_not_written_for_the_stale_while() -> None:
    now = 10 * MARK_STALE_MS
    assert is_gone(share("1", updated_ms=0), now)
    assert not is_gone(share("1", updated_ms=now - MARK_STALE_MS), now)
    assert is_gone(share("1", updated_ms=now - MARK_STALE_MS - 1), now)
