"""A client step keeps at most ``have_room`` of the ids it has that the
server lacks, and says when it left some out: a server claiming to hold
nothing names the client's whole storage in one reply. ``need`` is found
in full all the same."""

from __future__ import annotations

import os

from relay.protocol.negentropy import Negentropy, VectorStorage
from tests.reconcile.hostile_responder import id_list

OURS = sorted((t, os.urandom(32)) for t in range(1, 5001))


def test_a_server_that_holds_nothing_fills_the_room_and_no_more() -> None:
    client = Negentropy(VectorStorage(OURS))
    client.initiate()
    step = client.step(id_list([]), have_room=300)
    assert step.have == [i for _, i in OURS[:300]] and step.have_cut
    assert step.need == [] and step.message is None


def test_within_the_room_nothing_is_cut_and_need_is_whole() -> None:
    theirs = [os.urandom(32) for _ in range(40)]
    shared = [i for _, i in OURS[::2]]
    client = Negentropy(VectorStorage(OURS))
    client.initiate()
    step = client.step(id_list(shared + theirs), have_room=2500)
    assert len(step.have) == 2500 and not step.have_cut
    assert sorted(step.need) == sorted(theirs)


def test_past_the_room_need_is_still_whole() -> None:
    theirs = [os.urandom(32) for _ in range(40)]
    client = Negentropy(VectorStorage(OURS))
    client.initiate()
    step = client.step(id_list(theirs), have_room=10)
    assert len(step.have) == 10 and step.have_cut
    assert sorted(step.need) == sorted(theirs)
