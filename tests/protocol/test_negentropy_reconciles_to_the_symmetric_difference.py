"""Property: any two sets reconcile to exactly their symmetric difference
(client ``have`` = client - server, ``need`` = server - client): equal
timestamps, empty sides, one-sided and huge differences, with and without
a frame limit, any split options, and within a createdAt window. The
B+tree index answers every storage query exactly like a sorted array."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.protocol.negentropy import (
    Item,
    Negentropy,
    NegentropyOptions,
    Storage,
    StorageWindow,
    VectorStorage,
)
from relay.reconcile.tree import FingerprintTree

ids = st.binary(min_size=32, max_size=32)
# few distinct timestamps, so many items share one and bounds need id prefixes
items = st.tuples(st.integers(0, 20), ids)
sets = st.lists(items, max_size=300, unique_by=lambda i: i[1])
# shared / only-a / only-b, disjoint by id (an op's id fixes its createdAt)
partitions = st.lists(items, max_size=600, unique_by=lambda i: i[1]).flatmap(
    lambda all_items: st.tuples(
        st.just(all_items),
        st.lists(st.integers(0, 2), min_size=len(all_items), max_size=len(all_items)),
    )
)


def parts(drawn: tuple[list[Item], list[int]]) -> tuple[list[Item], list[Item], list[Item]]:
    all_items, where = drawn
    return tuple([i for i, w in zip(all_items, where, strict=True) if w == k] for k in range(3))  # type: ignore[return-value]


options = st.builds(
    NegentropyOptions,
    frame_size_limit=st.sampled_from([0, 4096]),
    buckets=st.integers(2, 16),
    narrow_buckets=st.integers(2, 8),
    id_list_below=st.integers(2, 40),
    random_splits=st.booleans(),
)


def reconcile(
    client: Storage, server: Storage, opts: NegentropyOptions
) -> tuple[set[bytes], set[bytes], int]:
    ours = Negentropy(client, opts, random.Random(1))
    theirs = Negentropy(server, opts, random.Random(2))
    have: set[bytes] = set()
    need: set[bytes] = set()
    message: bytes | None = ours.initiate()
    rounds = 0
    while message is not None:
        rounds += 1
        assert rounds < 500, "no progress"
        if opts.frame_size_limit:
            assert len(message) <= opts.frame_size_limit
        reply = theirs.respond(message)
        if opts.frame_size_limit:
            assert len(reply) <= opts.frame_size_limit
        step = ours.step(reply)
        have.update(step.have)
        need.update(step.need)
        message = step.message
    return have, need, rounds


def split(
    shared: list[Item], only_a: list[Item], only_b: list[Item]
) -> tuple[list[Item], list[Item]]:
    return shared + only_a, shared + only_b


@settings(max_examples=150, deadline=None)
@given(drawn=partitions, opts=options)
def test_reconciliation_finds_exactly_the_symmetric_difference(
    drawn: tuple[list[Item], list[int]], opts: NegentropyOptions
) -> None:
    a, b = split(*parts(drawn))
    a_ids, b_ids = {i for _, i in a}, {i for _, i in b}
    have, need, _ = reconcile(VectorStorage(a), FingerprintTree(b), opts)
    assert have == a_ids - b_ids
    assert need == b_ids - a_ids


@settings(max_examples=60, deadline=None)
@given(drawn=partitions, since=st.integers(0, 20), width=st.integers(0, 21))
def test_a_window_reconciles_only_the_items_inside_it(
    drawn: tuple[list[Item], list[int]], since: int, width: int
) -> None:
    a, b = split(*parts(drawn))
    until = since + width
    inside = lambda s: {i for t, i in s if since <= t < until}  # noqa: E731
    have, need, _ = reconcile(
        StorageWindow(VectorStorage(a), since, until),
        StorageWindow(FingerprintTree(b), since, until),
        NegentropyOptions(),
    )
    assert have == inside(a) - inside(b)
    assert need == inside(b) - inside(a)


def test_a_huge_one_sided_difference_under_a_frame_limit() -> None:
    rng = random.Random(7)
    big = [(rng.randrange(1000), rng.randbytes(32)) for _ in range(20_000)]
    opts = NegentropyOptions(frame_size_limit=4096)
    have, need, rounds = reconcile(VectorStorage([]), VectorStorage(big), opts)
    assert (have, need) == (set(), {i for _, i in big})
    assert rounds > 20_000 * 32 // 4096  # the limit really cut the id lists
    have, need, _ = reconcile(VectorStorage(big), VectorStorage([]), opts)
    assert have == {i for _, i in big} and not need


def test_identical_sets_agree_in_one_round_trip_under_1_kib() -> None:
    rng = random.Random(8)
    same = [(rng.randrange(10**12), rng.randbytes(32)) for _ in range(50_000)]
    ours = Negentropy(VectorStorage(same))
    first = ours.initiate()
    reply = Negentropy(FingerprintTree(same)).respond(first)
    assert len(first) + len(reply) < 1024
    assert ours.step(reply).message is None


@settings(max_examples=50, deadline=None)
@given(
    first=sets,
    later=sets,
    probes=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=30),
)
def test_the_tree_answers_like_a_sorted_array_as_items_arrive(
    first: list[Item], later: list[Item], probes: list[tuple[int, int]]
) -> None:
    tree = FingerprintTree(first)
    for item in later:
        tree.insert(item)
    array = VectorStorage(first + later)
    assert tree.size() == array.size()
    assert list(tree.items(0, tree.size())) == list(array.items(0, array.size()))
    n = array.size()
    for x, y in probes:
        lo, hi = sorted((min(x, n), min(y, n)))
        assert tree.fingerprint(lo, hi) == array.fingerprint(lo, hi)
        if lo < n:
            key = array.item(lo)
            assert tree.item(lo) == key
            assert tree.lower_bound(key) == lo


def test_the_tree_stays_exact_through_many_node_splits() -> None:
    rng = random.Random(9)
    items = [(rng.randrange(50), rng.randbytes(32)) for _ in range(12_000)]
    tree = FingerprintTree()
    for item in items:
        assert tree.insert(item)
    assert not tree.insert(items[0])
    array = VectorStorage(items)
    for _ in range(300):
        lo = rng.randrange(len(items))
        hi = rng.randrange(lo, len(items) + 1)
        assert tree.fingerprint(lo, hi) == array.fingerprint(lo, hi)
        assert tree.lower_bound(array.item(lo)) == lo
