"""Store contract: blobs, peer cursors, the relay identity, and what a
durable store keeps across a reopen."""

from __future__ import annotations

from dataclasses import replace

from stores.base import CommitBatch, PendingOp, RelayIdentityRecord, RelayStore
from tests.stores.conftest import append, chain, commit, op, reopen

IDENTITY = RelayIdentityRecord("did:dfos:relay", "key1", b"\x01" * 32, "tok.gen", "tok.prof")


async def test_blobs_dedup_by_creator_and_document(opened: RelayStore) -> None:
    await opened.put_blob("did:dfos:a", "doc1", b"first")
    await opened.put_blob("did:dfos:a", "doc1", b"second")  # first write wins
    await opened.put_blob("did:dfos:b", "doc1", b"\x00\xff")
    assert await opened.get_blob("did:dfos:a", "doc1") == b"first"
    assert await opened.get_blob("did:dfos:b", "doc1") == b"\x00\xff"
    assert await opened.get_blob("did:dfos:a", "doc2") is None


async def test_peer_cursors(opened: RelayStore) -> None:
    assert await opened.get_peer_cursor("https://peer") is None
    await opened.set_peer_cursor("https://peer", "c1")
    await opened.set_peer_cursor("https://peer", "c2")
    await opened.set_peer_cursor("https://other", "x")
    assert await opened.get_peer_cursor("https://peer") == "c2"
    assert await opened.get_peer_cursor("https://other") == "x"


async def test_relay_identity_is_written_once(opened: RelayStore) -> None:
    assert await opened.get_relay_identity() is None
    await opened.put_relay_identity(IDENTITY)
    other = RelayIdentityRecord("did:dfos:other", "k", b"\x02" * 32, "g", "p")
    await opened.put_relay_identity(other)
    assert await opened.get_relay_identity() == IDENTITY


async def test_ping(opened: RelayStore) -> None:
    await opened.ping()


async def test_everything_survives_reopen(opened: RelayStore) -> None:
    await opened.put_relay_identity(IDENTITY)
    await append(opened, op("c1"), op("c2", parent="c1"))
    await commit(opened, CommitBatch(chains={"did:dfos:a": chain("did:dfos:a", "c2")}))
    await commit(opened, CommitBatch(waiting={"w": PendingOp("w", "tok.w", "op:p")}))
    await opened.put_blob("did:dfos:a", "d", b"blob")
    await opened.set_peer_cursor("https://peer", "c9")
    await opened.close()

    again = reopen(opened)
    await again.open()
    try:
        assert await again.get_relay_identity() == IDENTITY
        assert [e.cid for e in (await again.read_log(None, 10)).entries] == ["c1", "c2"]
        assert await again.get_operation("c2") == replace(op("c2", parent="c1"), seq=2)
        assert (await again.get_chain("did:dfos:a")) == chain("did:dfos:a", "c2")
        assert await again.get_unsequenced(5) == [PendingOp("w", "tok.w", "op:p")]
        assert await again.get_blob("did:dfos:a", "d") == b"blob"
        assert await again.get_peer_cursor("https://peer") == "c9"
        await append(again, op("c3"))
        assert await again.log_length() == 3
    finally:
        await again.close()
