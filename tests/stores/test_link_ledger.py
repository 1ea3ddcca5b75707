"""Store contract: the per-link replication ledger. A link is keyed by
(peer, scope, direction), upserted whole, listed in key order, bounded in
its pending tokens, and survives a reopen of a durable store. So is each
process's share of an out-link, keyed by (peer, scope, writer)."""

from __future__ import annotations

from dataclasses import replace

from stores.base import FULL_SCOPE, LINK_PENDING_MAX, LinkRecord, OutMark, RelayStore
from tests.stores.conftest import reopen

FULL = LinkRecord(
    peer_url="https://a.example",
    scope_id=FULL_SCOPE,
    direction="in",
    state="repairing",
    received_token="ep1.42",
    applied_token="ep1.40",
    pending_tokens=("ep1.41", "ep1.42"),
    failures=3,
    last_success_ms=1_000,
    last_failure_ms=2_000,
    last_error="PeerUnreachable: connection refused",
    diagnostics={"missing": {"identity": ["did:dfos:x"], "operation": ["bafyop"]}},
    remote_head=45,
    caught_up_ms=900,
    updated_ms=2_001,
)


async def test_an_unknown_link_is_none(opened: RelayStore) -> None:
    assert await opened.get_link("https://a.example", FULL_SCOPE, "in") is None
    assert await opened.list_links() == []


async def test_a_link_round_trips_every_field(opened: RelayStore) -> None:
    await opened.put_link(FULL)
    assert await opened.get_link("https://a.example", FULL_SCOPE, "in") == FULL


async def test_a_fresh_link_keeps_its_defaults(opened: RelayStore) -> None:
    fresh = LinkRecord("https://a.example", FULL_SCOPE, "out")
    await opened.put_link(fresh)
    assert await opened.get_link("https://a.example", FULL_SCOPE, "out") == fresh


async def test_put_upserts_by_peer_scope_and_direction(opened: RelayStore) -> None:
    await opened.put_link(FULL)
    await opened.put_link(replace(FULL, direction="out", state="live"))
    await opened.put_link(replace(FULL, scope_id="scope:abc", state="initial"))
    moved = replace(FULL, state="live", applied_token="ep1.42", pending_tokens=(), failures=0,
                    last_error=None, diagnostics={}, updated_ms=3_000)  # fmt: skip
    await opened.put_link(moved)
    assert await opened.get_link("https://a.example", FULL_SCOPE, "in") == moved
    keys = [(r.peer_url, r.scope_id, r.direction, r.state) for r in await opened.list_links()]
    assert keys == [
        ("https://a.example", "*", "in", "live"),
        ("https://a.example", "*", "out", "live"),
        ("https://a.example", "scope:abc", "in", "initial"),
    ]


async def test_links_are_listed_in_key_order(opened: RelayStore) -> None:
    for url in ("https://c", "https://a", "https://b"):
        await opened.put_link(LinkRecord(url, FULL_SCOPE, "out"))
        await opened.put_link(LinkRecord(url, FULL_SCOPE, "in"))
    keys = [r.key for r in await opened.list_links()]
    assert keys == sorted(keys)
    assert len(keys) == 6


async def test_pending_tokens_are_bounded(opened: RelayStore) -> None:
    many = tuple(f"e.{n}" for n in range(LINK_PENDING_MAX + 10))
    await opened.put_link(replace(FULL, pending_tokens=many))
    stored = await opened.get_link(FULL.peer_url, FULL.scope_id, FULL.direction)
    assert stored is not None and stored.pending_tokens == many[:LINK_PENDING_MAX]


async def test_the_store_keeps_its_own_copy_of_diagnostics(opened: RelayStore) -> None:
    diagnostics: dict[str, object] = {"missing": {"operation": ["a"]}}
    await opened.put_link(replace(FULL, diagnostics=diagnostics))
    diagnostics["missing"] = {}
    stored = await opened.get_link(FULL.peer_url, FULL.scope_id, FULL.direction)
    assert stored is not None and stored.diagnostics == {"missing": {"operation": ["a"]}}


async def test_delete_forgets_one_link(opened: RelayStore) -> None:
    await opened.put_link(FULL)
    await opened.put_link(replace(FULL, direction="out"))
    assert await opened.delete_link(FULL.peer_url, FULL.scope_id, "in") is True
    assert await opened.delete_link(FULL.peer_url, FULL.scope_id, "in") is False
    assert [r.direction for r in await opened.list_links()] == ["out"]


async def test_the_ledger_survives_reopen(opened: RelayStore) -> None:
    await opened.put_link(FULL)
    await opened.put_link(replace(FULL, direction="out", state="paused"))
    await opened.close()
    again = reopen(opened)
    await again.open()
    try:
        assert await again.get_link(FULL.peer_url, FULL.scope_id, "in") == FULL
        out = await again.get_link(FULL.peer_url, FULL.scope_id, "out")
        assert out is not None and out.state == "paused"
    finally:
        await again.close()


async def test_only_an_operator_write_pauses_or_resumes_a_link(opened: RelayStore) -> None:
    """A process that has not heard of a pause (or a resume) made elsewhere
    writes its link as it knows it: the other fields land, the pause stays."""
    key = (FULL.peer_url, FULL.scope_id, "in")
    await opened.put_link(replace(FULL, state="paused"), operator=True)
    await opened.put_link(replace(FULL, state="live", failures=7))
    stored = await opened.get_link(*key)
    assert stored is not None and (stored.state, stored.failures) == ("paused", 7)
    await opened.put_link(replace(FULL, state="initial"), operator=True)  # a resume
    await opened.put_link(replace(FULL, state="paused", failures=8))  # not heard of it
    stored = await opened.get_link(*key)
    assert stored is not None and (stored.state, stored.failures) == ("initial", 8)
    await opened.put_link(replace(FULL, state="live"))
    stored = await opened.get_link(*key)
    assert stored is not None and stored.state == "live"  # other states move freely


# each process's share of an out-link (``OutMark``) ------------------------------
SHARE = LinkRecord(
    peer_url="https://a.example",
    scope_id=FULL_SCOPE,
    direction="out",
    state="repairing",
    received_token="42",
    applied_token="40",
    pending_tokens=("41", "42"),
    failures=2,
    last_success_ms=1_000,
    last_failure_ms=2_000,
    last_error="PeerUnreachable: connection refused",
    caught_up_ms=900,
    updated_ms=2_001,
)


async def test_a_share_round_trips_apart_from_the_shared_link(opened: RelayStore) -> None:
    await opened.put_out_mark(OutMark("w1", SHARE))
    assert await opened.list_out_marks() == [OutMark("w1", SHARE)]
    assert await opened.list_links() == []  # the shared row is another thing


async def test_shares_are_upserted_per_writer_and_listed_in_key_order(opened: RelayStore) -> None:
    await opened.put_out_mark(OutMark("w2", SHARE))
    await opened.put_out_mark(OutMark("w1", SHARE))
    await opened.put_out_mark(OutMark("w1", replace(SHARE, peer_url="https://0.example")))
    moved = replace(SHARE, state="paused", applied_token="42", pending_tokens=(), updated_ms=3)
    await opened.put_out_mark(OutMark("w1", moved))  # no pause rule: the writer's own state
    listed = [(m.writer, m.record.peer_url, m.record) for m in await opened.list_out_marks()]
    assert [(w, url) for w, url, _ in listed] == [
        ("w1", "https://0.example"), ("w1", "https://a.example"), ("w2", "https://a.example"),
    ]  # fmt: skip
    assert listed[1][2] == moved and listed[2][2] == SHARE


async def test_a_share_keeps_no_diagnostics_and_bounded_pending(opened: RelayStore) -> None:
    many = tuple(str(n) for n in range(LINK_PENDING_MAX + 10))
    await opened.put_out_mark(
        OutMark("w1", replace(SHARE, pending_tokens=many, diagnostics={"x": 1}, remote_head=9))
    )
    (mark,) = await opened.list_out_marks()
    assert mark.record.pending_tokens == many[:LINK_PENDING_MAX]
    assert (mark.record.diagnostics, mark.record.remote_head) == ({}, None)


async def test_a_share_is_deleted_only_as_it_was_read(opened: RelayStore) -> None:
    """Two processes clearing one gone share: only one of them deletes it."""
    await opened.put_out_mark(OutMark("w1", SHARE))
    await opened.put_out_mark(OutMark("w2", SHARE))
    assert await opened.delete_out_mark("w1", SHARE.peer_url, FULL_SCOPE, updated_ms=5) is False
    assert await opened.delete_out_mark("w1", SHARE.peer_url, FULL_SCOPE, SHARE.updated_ms)
    assert not await opened.delete_out_mark("w1", SHARE.peer_url, FULL_SCOPE, SHARE.updated_ms)
    assert await opened.delete_out_mark("w2", SHARE.peer_url, FULL_SCOPE) is True
    assert await opened.list_out_marks() == []


async def test_shares_survive_reopen(opened: RelayStore) -> None:
    await opened.put_out_mark(OutMark("w1", SHARE))
    await opened.close()
    again = reopen(opened)
    await again.open()
    try:
        assert await again.list_out_marks() == [OutMark("w1", SHARE)]
    finally:
        await again.close()
