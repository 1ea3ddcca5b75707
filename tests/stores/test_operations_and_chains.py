"""Store contract: operations, chains, keys, beacons, countersignatures,
rejections, and the atomicity of ``commit``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stores.base import (
    BeaconRecord,
    ChainRecord,
    CommitBatch,
    CountersignatureRecord,
    IdentityKeyRecord,
    Rejection,
    RelayStore,
    StateQuery,
    StoreError,
)
from tests.stores.conftest import append, chain, commit, is_durable, op


async def test_operation_round_trips_with_state_snapshot(opened: RelayStore) -> None:
    genesis = op("c1", at=1, state={"did": "did:dfos:a", "deleted": False, "keys": [["a", "b"]]})
    child = op("c2", parent="c1", at=2)
    beacon = op("c3", kind="beacon", state=None)
    await append(opened, genesis, child, beacon)
    genesis, child, beacon = (replace(o, seq=n) for n, o in enumerate((genesis, child, beacon), 1))
    assert await opened.get_operation("c1") == genesis
    assert await opened.get_operation("c2") == child
    assert await opened.get_operation("c3") == beacon
    assert await opened.get_operation("nope") is None
    async with opened.sequencing() as s:
        found = await s.get_operations(["c1", "c3", "missing"])
    assert found == {"c1": genesis, "c3": beacon}


async def test_state_strings_round_trip_whatever_they_look_like(opened: RelayStore) -> None:
    # the memory store packs CID-like strings no row holds (issue 17)
    doc = "bafyreifh2h2kwl5ebqztdcazp6zgbhi2eqqthzwfj7v2zjoixxmv7r7dfy"
    state = {
        "document_cid": doc,
        "head": "bafyrei",
        "odd": "bafyrei\u00e9",
        "list": [doc, "bafyreix", ["bafyrei"]],
        "shared": "c1",  # the CID of an op of the store
    }
    await append(opened, op("c1", at=1, state=state))
    found = await opened.get_operation("c1")
    assert found is not None and found.state == state
    assert repr(found.state) == repr(state)


async def test_sequenced_and_keys_reads_what_a_precheck_needs(opened: RelayStore) -> None:
    await append(opened, op("c1"), op("c2"))
    await opened.put_raw_ops([("c3", "tok.c3")])  # buffered is not sequenced
    keys = [
        IdentityKeyRecord("did:a", "k1", "z1"),
        IdentityKeyRecord("did:a", "k2", "z2"),
        IdentityKeyRecord("did:b", "k1", "z3"),
    ]
    await commit(opened, CommitBatch(identity_keys=keys))
    sequenced, found = await opened.sequenced_and_keys({"c1", "c3", "c9"}, {"did:a", "did:x"})
    assert sequenced == {"c1"}
    assert found == {"did:a": keys[:2]}  # in history order
    assert await opened.sequenced_and_keys([], []) == (set(), {})


async def test_batch_reads_accept_empty_collections(opened: RelayStore) -> None:
    async with opened.sequencing() as s:
        assert await s.get_operations([]) == {}
        assert await s.get_chains([]) == {}
        assert await s.get_identity_keys([]) == {}
        assert await s.get_beacons([]) == {}
        assert await s.get_countersign_pairs([]) == set()
        assert await s.get_rejections([]) == {}
        assert await s.take_waiting([]) == []
        assert await s.count_pending() == 0


async def test_chains_upsert_head_and_state(opened: RelayStore) -> None:
    await commit(opened, CommitBatch(chains={"did:dfos:a": chain("did:dfos:a", "c1", 1)}))
    newer = chain("did:dfos:a", "c2", 2, deleted=True)
    await commit(opened, CommitBatch(chains={"did:dfos:a": newer}))
    assert await opened.get_chain("did:dfos:a") == newer
    assert await opened.get_chain("did:dfos:b") is None
    async with opened.sequencing() as s:
        assert await s.get_chains(["did:dfos:a", "did:dfos:b"]) == {"did:dfos:a": newer}


async def test_identity_keys_are_unique_and_kept_in_order(opened: RelayStore) -> None:
    k1 = IdentityKeyRecord("did:dfos:a", "k1", "z6Mk1")
    k2 = IdentityKeyRecord("did:dfos:a", "k2", "z6Mk2")
    k1_rotated = IdentityKeyRecord("did:dfos:a", "k1", "z6Mk3")
    other = IdentityKeyRecord("did:dfos:b", "k1", "z6Mk1")
    await commit(opened, CommitBatch(identity_keys=[k1, k2, k1]))
    await commit(opened, CommitBatch(identity_keys=[k1, k1_rotated, other]))
    async with opened.sequencing() as s:
        keys = await s.get_identity_keys(["did:dfos:a", "did:dfos:b", "did:dfos:c"])
    assert keys == {"did:dfos:a": [k1, k2, k1_rotated], "did:dfos:b": [other]}
    # The proof reader sees the same history outside any session.
    assert await opened.get_identity_keys(["did:dfos:a", "did:dfos:b", "did:dfos:c"]) == keys
    assert await opened.get_identity_keys([]) == {}


async def test_beacons_upsert_latest(opened: RelayStore) -> None:
    first = BeaconRecord("did:dfos:a", "b1", "tok.b1", 1)
    second = BeaconRecord("did:dfos:a", "b2", "tok.b2", 2)
    await commit(opened, CommitBatch(beacons={first.did: first}))
    await commit(opened, CommitBatch(beacons={second.did: second}))
    assert await opened.get_beacon("did:dfos:a") == second
    assert await opened.get_beacon("did:dfos:z") is None
    async with opened.sequencing() as s:
        assert await s.get_beacons(["did:dfos:a", "did:dfos:z"]) == {"did:dfos:a": second}


async def test_countersignatures_unique_per_target_and_witness(opened: RelayStore) -> None:
    a1 = CountersignatureRecord("t1", "did:w:a", "x1", "tok.x1")
    a2 = CountersignatureRecord("t1", "did:w:a", "x2", "tok.x2")  # same pair: ignored
    b1 = CountersignatureRecord("t1", "did:w:b", "x3", "tok.x3")
    other = CountersignatureRecord("t2", "did:w:a", "x4", "tok.x4")
    await commit(opened, CommitBatch(countersignatures=[a1, b1]))
    await commit(opened, CommitBatch(countersignatures=[a2, other]))
    assert await opened.get_countersignatures("t1") == ["tok.x1", "tok.x3"]
    assert await opened.get_countersignatures("t2") == ["tok.x4"]
    assert await opened.get_countersignatures("t3") == []
    async with opened.sequencing() as s:
        pairs = await s.get_countersign_pairs(
            [("t1", "did:w:a"), ("t1", "did:w:c"), ("t2", "did:w:b"), ("t2", "did:w:a")]
        )
    assert pairs == {("t1", "did:w:a"), ("t2", "did:w:a")}


async def test_rejections_keyed_by_token_hash(opened: RelayStore) -> None:
    first = Rejection("h1", "c1", "bad signature")
    again = Rejection("h1", "c1", "still bad")
    await commit(opened, CommitBatch(rejections=[first, Rejection("h2", "c1", "forged")]))
    await commit(opened, CommitBatch(rejections=[again]))
    async with opened.sequencing() as s:
        found = await s.get_rejections(["h1", "h2", "h3"])
    assert found == {"h1": again, "h2": Rejection("h2", "c1", "forged")}


async def test_failing_commit_leaves_nothing(opened: RelayStore) -> None:
    await append(opened, op("c1"))
    await opened.put_raw_ops([("c9", "tok.c9")])
    bad = CommitBatch(
        operations=[op("c2"), op("c1")],  # c1 again: the schema refuses it
        chains={"did:dfos:a": chain("did:dfos:a", "c2")},
        beacons={"did:dfos:a": BeaconRecord("did:dfos:a", "b", "tok.b", 1)},
        rejections=[Rejection("h", "c3", "no")],
        resolved_cids={"c9"},
    )
    if not is_durable(opened):
        pytest.skip("the memory store does not check uniqueness")
    with pytest.raises(StoreError):
        await commit(opened, bad)
    assert await opened.get_operation("c2") is None
    assert await opened.get_chain("did:dfos:a") is None
    assert await opened.get_beacon("did:dfos:a") is None
    assert await opened.log_length() == 1
    assert await opened.count_unsequenced() == 1
    async with opened.sequencing() as s:
        assert await s.get_rejections(["h"]) == {}
    # the store is still usable afterwards
    await append(opened, op("c2"))
    assert await opened.log_length() == 2


async def test_commit_error_caught_inside_the_session_still_rolls_back(
    opened: RelayStore,
) -> None:
    if not is_durable(opened):
        pytest.skip("the memory store does not check uniqueness")
    await append(opened, op("c1"))
    async with opened.sequencing() as s:
        with pytest.raises(StoreError):
            await s.commit(CommitBatch(operations=[op("c2"), op("c1")]))
    assert await opened.get_operation("c2") is None


async def test_session_without_commit_writes_nothing(opened: RelayStore) -> None:
    async with opened.sequencing() as s:
        await s.get_operations(["c1"])
    assert await opened.log_length() == 0


async def test_session_exception_discards_the_session(opened: RelayStore) -> None:
    with pytest.raises(RuntimeError):
        async with opened.sequencing() as s:
            await s.get_chains(["did:dfos:a"])
            raise RuntimeError("verifier crashed")
    await append(opened, op("c1"))  # the writer is free again
    assert await opened.log_length() == 1


async def test_sessions_are_serialized(opened: RelayStore) -> None:
    """Concurrent read-modify-write sessions never lose an update."""
    import asyncio

    await commit(opened, CommitBatch(chains={"did:dfos:a": chain("did:dfos:a", "h", n=0)}))

    async def bump(i: int) -> None:
        async with opened.sequencing() as s:
            current = (await s.get_chains(["did:dfos:a"]))["did:dfos:a"]
            await asyncio.sleep(0)
            n = int(current.state["n"]) + 1
            await s.commit(
                CommitBatch(
                    operations=[op(f"c{i}")],
                    chains={"did:dfos:a": chain("did:dfos:a", f"c{i}", n=n)},
                )
            )

    await asyncio.gather(*(bump(i) for i in range(8)))
    final = await opened.get_chain("did:dfos:a")
    assert final is not None and final.state["n"] == 8
    assert await opened.log_length() == 8


async def test_read_state_answers_a_whole_round_and_follows_content_links(
    opened: RelayStore,
) -> None:
    creator = chain("did:dfos:c", "i1")
    content_state = {"content_id": "content1", "creator_did": "did:dfos:c", "length": 1}
    content = ChainRecord("content1", "content", "g1", "g1", 5, content_state)
    genesis = op("g1", kind="content-op", chain_id="content1", state=content_state)
    key = IdentityKeyRecord("did:dfos:c", "k1", "z6Mk1")
    other_key = IdentityKeyRecord("did:dfos:w", "k1", "z6Mk9")
    beacon = BeaconRecord("did:dfos:c", "b1", "tok.b1", 7)
    sig = CountersignatureRecord("g1", "did:dfos:w", "s1", "tok.s1")
    rejection = Rejection("h1", "x1", "bad")
    await append(opened, genesis)
    await commit(
        opened,
        CommitBatch(
            chains={"did:dfos:c": creator, "content1": content},
            identity_keys=[key, other_key],
            beacons={"did:dfos:c": beacon},
            countersignatures=[sig],
            rejections=[rejection],
        ),
    )
    query = StateQuery(
        cids=frozenset({"g1", "missing"}),
        key_dids=frozenset({"did:dfos:w"}),
        beacon_dids=frozenset({"did:dfos:c"}),
        pairs=frozenset({("g1", "did:dfos:w"), ("g1", "did:dfos:nobody")}),
        token_hashes=frozenset({"h1", "h2"}),
    )
    async with opened.sequencing() as s:
        rows = await s.read_state(query)
    assert rows.operations == {"g1": replace(genesis, seq=1)}
    # the content op brought its chain, which brought its creator and keys
    assert rows.chains == {"content1": content, "did:dfos:c": creator}
    assert rows.identity_keys == {"did:dfos:c": [key], "did:dfos:w": [other_key]}
    assert rows.beacons == {"did:dfos:c": beacon}
    assert rows.pairs == {("g1", "did:dfos:w")}
    assert rows.rejections == {"h1": rejection}
    assert rows.pending is None  # not asked
    async with opened.sequencing() as s:
        empty = await s.read_state(StateQuery())
    assert not (empty.operations or empty.chains or empty.identity_keys or empty.pairs)
