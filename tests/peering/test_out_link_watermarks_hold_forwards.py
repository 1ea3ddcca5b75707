"""A coordinator's forwards count on its out-link watermarks like its own
pushes (``relay.peering.watermark.OutLinks``, the out-links of the
replication ledger): an op on the fan-out's forward queue holds every
out-link below it until it is handed to its lanes, even when it sits in two
batches (as coordinator and as stand-in); a lane that then gives it up holds
that link below it, repairing, until a reconciliation pushes to the peer;
one the forward queue had no room for holds the links of its share (every
link when the share is not known). A forward whose share cannot be known
when it is forwarded goes to every lane."""

from __future__ import annotations

from relay.peering.config import PeeringConfig
from relay.peering.fanout import Routed
from relay.peering.ledger import LinkLedger
from relay.peering.service import build_peering
from relay.peering.watermark import OutLinks
from relay.rules.outcomes import SequencedOp
from relay.testing.server import free_port

A, B = "http://a.test", "http://b.test"


def _op(seq: int) -> SequencedOp:
    return SequencedOp(f"bafy{seq}", f"tok{seq}", "artifact", "did:dfos:x", seq, 0, "did:dfos:x")


def _coordinator_with_one_forward(batches: int) -> OutLinks:
    """Head 4 delivered, then op 5 arrives for forwarding in ``batches`` batches."""
    links = OutLinks(LinkLedger())
    links.start([A, B], 4)
    links.offered([_op(5)])
    for _ in range(batches):
        links.forwarding(["tok5"])
    links.offer_done([A, B])
    return links


def test_an_op_waiting_to_be_forwarded_holds_every_out_link() -> None:
    links = _coordinator_with_one_forward(1)
    assert links.head == 5 and links.watermark(A) == links.watermark(B) == 4
    links.queued(A, ["tok5"])  # the forward task hands it to a's lane only
    links.forwarded(["tok5"])
    assert links.watermark(B) == 5  # not meant for b
    assert links.watermark(A) == 4  # queued, not delivered yet


async def test_a_forward_its_lane_gives_up_holds_that_link_repairing() -> None:
    links = _coordinator_with_one_forward(1)
    links.lost(A, ["tok5"])  # handed to a's lane, whose queue was full
    links.forwarded(["tok5"])
    assert links.watermark(A) == 4 and links.ledger.get(A, "out").state == "repairing"
    await links.repaired(A, 5)  # a reconciliation pushed everything up to 5
    assert links.watermark(A) == 5 and links.ledger.get(A, "out").state == "live"


def test_an_op_in_two_forward_batches_is_held_until_both_are_done() -> None:
    links = _coordinator_with_one_forward(2)
    links.queued(A, ["tok5"])
    links.forwarded(["tok5"])  # the first batch (a's)
    assert links.watermark(B) == 4  # b's batch still holds it
    links.queued(B, ["tok5"])
    links.forwarded(["tok5"])
    links.lost(B, ["tok5"])
    assert links.watermark(B) == 4 and links.ledger.get(B, "out").state == "repairing"


def test_a_forward_the_queue_had_no_room_for_holds_every_link() -> None:
    links = _coordinator_with_one_forward(1)
    links.forwarded(["tok5"], lost=True)
    for url in (A, B):
        assert links.watermark(url) == 4 and links.ledger.get(url, "out").state == "repairing"


def test_a_forward_the_queue_had_no_room_for_holds_the_links_of_its_share_only() -> None:
    links = _coordinator_with_one_forward(1)
    links.forwarded(["tok5"], lost=True, links=[A])  # its share: a
    assert links.watermark(A) == 4 and links.ledger.get(A, "out").state == "repairing"
    assert links.watermark(B) == 5 and links.ledger.get(B, "out").state != "repairing"


async def test_a_forward_whose_origin_list_cannot_be_read_goes_to_every_link() -> None:
    """A coordinator (here a stand-in) that cannot read the origin's peer
    list does not know the op's share: it hands the op to every lane (a
    superset of the share), and each link is held below it until its lane
    delivers it, as for any push."""
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: its list cannot be read
    peering = build_peering([A, B], config=PeeringConfig(backoff_base_s=0.01))
    links = peering.out_links
    links.start([A, B], 4)
    links.offered([_op(5)])
    peering.fanout.start()
    try:
        peering.fanout.forward_again(nowhere, [Routed("bafy5", "tok5", "did:dfos:x")], "did:dfos:c")
        links.offer_done([A, B])
        await peering.fanout.flushed()
        assert peering.fanout.flooded == 1
        assert [lane.backlog for lane in peering.gossip.lanes.values()] == [1, 1]
        for url in (A, B):  # queued (the lanes are not started here), not lost
            assert (links.watermark(url), peering.ledger.get(url, "out").state) == (4, "initial")
    finally:
        await peering.stop()
