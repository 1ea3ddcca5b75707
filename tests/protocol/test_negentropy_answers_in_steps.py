"""A long message is worked through in steps, pausing every
``ranges_per_step`` ranges, so an event loop can interleave it with other
work. Items may arrive or be purged during a pause: the reply still
answers every range for what the storage held when that range was
reached, so a run never misses an item the server held throughout, and
never reports one that neither side ever held."""

from __future__ import annotations

import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.protocol.negentropy import (
    INFINITY,
    Bound,
    Item,
    Mode,
    Negentropy,
    NegentropyOptions,
    StorageWindow,
    VectorStorage,
    encode_varint,
)
from relay.protocol.negentropy.wire import BoundWriter
from relay.reconcile.tree import FingerprintTree

ids = st.binary(min_size=32, max_size=32)
# an id fixes its timestamp (an op's CID fixes its createdAt), so one pool
everything = st.lists(st.tuples(st.integers(0, 20), ids), max_size=600, unique_by=lambda i: i[1])
# where each item is: the client's, the server's, both, arriving at the
# server, or the client's and arriving at the server
WHERE = ["client", "server", "both", "arriving", "client+arriving"]
placed = everything.flatmap(
    lambda pool: st.lists(st.sampled_from(WHERE), min_size=len(pool), max_size=len(pool)).map(
        lambda where: list(zip(pool, where, strict=True))
    )
)


def skip_ranges_then_a_fingerprint(count: int) -> bytes:
    writer, out = BoundWriter(), bytearray(b"\x61")
    for at in range(count):
        out += writer.encode(Bound(at)) + encode_varint(Mode.SKIP)
    out += writer.encode(Bound(INFINITY)) + encode_varint(Mode.FINGERPRINT) + bytes(16)
    return bytes(out)


def answer(theirs: Negentropy, message: bytes, on_pause: Callable[[int], None]) -> bytes:
    """Drive ``respond_in_steps``, calling ``on_pause`` with the pause count."""
    steps, pauses = theirs.respond_in_steps(message), 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            reply: bytes = done.value
            return reply
        pauses += 1
        on_pause(pauses)


def test_a_long_query_pauses_every_ranges_per_step_and_answers_as_at_once() -> None:
    rng = random.Random(3)
    tree = FingerprintTree([(rng.randrange(2000), rng.randbytes(32)) for _ in range(500)])
    opts = NegentropyOptions(ranges_per_step=100)
    message = skip_ranges_then_a_fingerprint(999)
    pauses: list[int] = []
    reply = answer(Negentropy(tree, opts), message, pauses.append)
    assert pauses[-1] == 10
    assert reply == Negentropy(tree, opts).respond(message)


@settings(max_examples=80, deadline=None)
@given(
    items=placed,
    purges=st.lists(st.booleans(), max_size=40),
    per_step=st.integers(1, 5),
    window=st.tuples(st.integers(0, 20), st.integers(0, 21)),
)
def test_items_arriving_during_pauses_never_hide_what_both_sides_had(
    items: list[tuple[Item, str]],
    purges: list[bool],
    per_step: int,
    window: tuple[int, int],
) -> None:
    client = [i for i, where in items if where.startswith("client") or where == "both"]
    server = [i for i, where in items if where in ("server", "both")]
    arriving = [i for i, where in items if where.endswith("arriving")]
    since, until = window[0], window[0] + window[1]
    tree = FingerprintTree(server)
    opts = NegentropyOptions(frame_size_limit=4096, ranges_per_step=per_step)
    ours = Negentropy(StorageWindow(VectorStorage(client), since, until), opts, random.Random(1))
    theirs = Negentropy(StorageWindow(tree, since, until), opts, random.Random(2))
    to_insert = list(arriving)
    ever, throughout = set(server), set(server)
    have: set[bytes] = set()
    need: set[bytes] = set()
    message: bytes | None = ours.initiate()
    rounds = 0
    while message is not None:
        rounds += 1
        assert rounds < 500, "no progress"

        def change(_: int) -> None:
            nonlocal tree
            if purges and purges.pop() and tree.size():  # a purge rebuilds the tree
                held = list(tree.items(0, tree.size()))
                throughout.discard(held.pop(len(held) // 2))
                tree = FingerprintTree(held)
            elif to_insert:  # an item commits while the round is paused
                tree.insert(to_insert[-1])
                ever.add(to_insert.pop())
            theirs.storage = StorageWindow(tree, since, until)

        step = ours.step(answer(theirs, message, change))
        have.update(step.have)
        need.update(step.need)
        message = step.message

    def inside(found: list[Item]) -> set[bytes]:
        return {i for t, i in found if since <= t < until}

    mine = inside(client)
    always, once = inside(list(throughout)), inside(list(ever))
    assert always - mine <= need <= once - mine
    assert mine - once <= have <= mine - always


def test_a_purge_during_a_pause_moves_no_range_onto_other_items() -> None:
    rng = random.Random(5)
    shared = sorted((rng.randrange(10**6), rng.randbytes(32)) for _ in range(64))
    opts = NegentropyOptions(ranges_per_step=1)
    ours = Negentropy(VectorStorage(shared), opts)
    theirs = Negentropy(FingerprintTree(shared), opts)

    def purge(pauses: int) -> None:
        if pauses == 2:  # the first range is answered; purge an item inside it,
            # so every later range's items move down one place
            theirs.storage = FingerprintTree(shared[1:])

    reply = answer(theirs, ours.initiate(), purge)
    # the first range was answered before the purge; every later one still
    # covers the same items on both sides, so all agree
    step = ours.step(reply)
    assert (step.have, step.need, step.message) == ([], [], None)
    assert theirs.storage.size() == 63  # the purge took place mid-round
